package demoservers

import (
	"slices"
	"strings"
	"testing"
)

type gotSearch struct {
	Results []kbResult `json:"results"`
}

func TestTerms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"What is the refund period for Software?", []string{"refund", "period", "software"}},
		{"policies holidays", []string{"policy", "holiday"}},
		{"软件退款期限", []string{"软件", "件退", "退款", "款期", "期限"}},
		{"VPN 连接", []string{"vpn", "连接"}},
		{"", nil},
	} {
		if got := terms(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("terms(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSearchKnowledgeBase(t *testing.T) {
	if n := len(kbCorpus); n < 18 || n > 25 {
		t.Errorf("corpus has %d documents, want about 20", n)
	}
	c := connect(t, "inprocess", "kb", testOptions(t))
	for _, tc := range []struct {
		query string
		first string
	}{
		{"software refund period", "POL-REFUND-SW"},
		{"软件退款期限", "POL-REFUND-SW"},
		{"return opened hardware", "POL-REFUND-HW"},
		{"hotel cost limit on business trips", "POL-TRAVEL"},
		{"password length MFA", "POL-SECURITY-PASSWORD"},
		{"public holidays 2026", "HB-HOLIDAYS"},
		{"phishing email", "POL-SECURITY-INCIDENT"},
		{"how many vacation days", "HB-VACATION"},
		{"VPN error 809", "FAQ-IT-VPN"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			got := callOK[gotSearch](t, c, "search_knowledge_base", map[string]any{"query": tc.query})
			if len(got.Results) == 0 {
				t.Fatalf("no results")
			}
			if got.Results[0].ID != tc.first {
				t.Errorf("first result %s (%v), want %s", got.Results[0].ID, got.Results, tc.first)
			}
			if len(got.Results) > 5 {
				t.Errorf("%d results, want at most the default topK 5", len(got.Results))
			}
			for i, r := range got.Results {
				if r.Score <= 0 || r.Score > 1 || r.Snippet == "" || r.Title == "" {
					t.Errorf("result %d = %+v", i, r)
				}
				if i > 0 && r.Score > got.Results[i-1].Score {
					t.Errorf("results not sorted by score: %v", got.Results)
				}
			}
		})
	}

	t.Run("snippet", func(t *testing.T) {
		got := callOK[gotSearch](t, c, "search_knowledge_base", map[string]any{"query": "software refund period"})
		if !strings.Contains(got.Results[0].Snippet, "30 days") {
			t.Errorf("snippet %q does not state the refund period", got.Results[0].Snippet)
		}
	})
	t.Run("topK", func(t *testing.T) {
		got := callOK[gotSearch](t, c, "search_knowledge_base", map[string]any{"query": "policy", "topK": 2})
		if len(got.Results) != 2 {
			t.Errorf("topK 2: %d results", len(got.Results))
		}
	})
	t.Run("no match", func(t *testing.T) {
		got := callOK[gotSearch](t, c, "search_knowledge_base", map[string]any{"query": "zyzzyva quux"})
		if got.Results == nil || len(got.Results) != 0 {
			t.Errorf("results = %#v, want an empty list", got.Results)
		}
	})
	for _, args := range []map[string]any{
		{"query": "refund", "topK": 21},
		{"query": "refund", "topK": 0},
		{"query": ""},
		{},
	} {
		if res := callTool(t, c, "search_knowledge_base", args); !res.IsError {
			t.Errorf("search_knowledge_base(%v): want isError", args)
		}
	}
}

func TestGetDocument(t *testing.T) {
	c := connect(t, "http", "kb", testOptions(t))
	got := callOK[kbDocument](t, c, "get_document", map[string]any{"id": "POL-TRAVEL"})
	if got.ID != "POL-TRAVEL" || got.Category != "policy" || !strings.Contains(got.Content, "per diem") || got.UpdatedAt == "" {
		t.Errorf("get_document = %+v", got)
	}
	if res := callTool(t, c, "get_document", map[string]any{"id": "NOPE"}); !res.IsError {
		t.Errorf("get_document(NOPE): want isError")
	}
}
