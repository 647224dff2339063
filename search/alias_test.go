package search

import (
	"fmt"
	"testing"
)

// TestCamelCaseNameRanksAsSplit: a tool name split on camelCase is the same words as one split
// on '_' or '-' (getLogs, get_logs, get-logs: get, log), and a query naming those words ranks
// the three alike. The joined form the tokenizer keeps for a camelCase name (getlog, so that a
// query spelling it as one word matches) is another spelling of its words, not one more word:
// before, it counted as a name word the query left uncovered (name coverage and proximity)
// and lengthened the name, so getLogs scored about two thirds of get_logs for "get logs".
func TestCamelCaseNameRanksAsSplit(t *testing.T) {
	ix := New(Config{})
	for i := range 20 {
		ix.Upsert(Doc{ID: fmt.Sprintf("f%02d__fill_%d", i, i), Server: fmt.Sprintf("f%02d", i), Name: fmt.Sprintf("fill_%d", i), Description: "Does other things with data."})
	}
	for _, name := range []string{"getLogs", "get_logs", "get-logs"} {
		ix.Upsert(Doc{ID: "s" + name + "__" + name, Server: "s" + name, Name: name, Description: "Returns the server logs."})
	}
	for _, q := range []string{"get logs", "get the logs"} {
		hits := ix.Search(Query{Text: q})
		if len(hits) != 3 {
			t.Fatalf("%q: %v, want the three log tools", q, hits)
		}
		for _, h := range hits[1:] {
			if h.Score != hits[0].Score {
				t.Errorf("%q: %v, want the three names to score alike", q, hits)
				break
			}
		}
	}
	// Spelled as one word, the camelCase name is still found first (an exact mention).
	if hits := ix.Search(Query{Text: "getLogs"}); len(hits) == 0 || hits[0].ID != "sgetLogs__getLogs" {
		t.Errorf("getLogs: %v, want sgetLogs__getLogs first", hits)
	}
	// A short identifier inside a name is a word of its own: a query without it does not
	// cover the name.
	ix.Upsert(Doc{ID: "aws__listS3Buckets", Server: "aws", Name: "listS3Buckets", Description: "Lists buckets."})
	ix.Upsert(Doc{ID: "gcs__listBuckets", Server: "gcs", Name: "listBuckets", Description: "Lists buckets."})
	if hits := ix.Search(Query{Text: "list buckets"}); len(hits) < 2 || hits[0].ID != "gcs__listBuckets" {
		t.Errorf("list buckets: %v, want gcs__listBuckets first", hits)
	}
}

// TestFullwidthExactMention: a tool name typed in fullwidth forms (a CJK input method in
// fullwidth mode: ｃｒｅａｔｅ＿ｉｓｓｕｅ, ｇｉｔｈｕｂ＿＿ｃｒｅａｔｅ＿ｉｓｓｕｅ) is an exact mention
// of it, as its words are the ASCII words (see TestFullwidthQuery). Before, the fullwidth
// underscore cut the mention in two and the query's words alone ranked the tools.
func TestFullwidthExactMention(t *testing.T) {
	ix := New(Config{})
	for i := range 20 {
		ix.Upsert(Doc{ID: fmt.Sprintf("f%02d__fill_%d", i, i), Server: fmt.Sprintf("f%02d", i), Name: fmt.Sprintf("fill_%d", i), Description: "Does other things with data."})
	}
	ix.Upsert(Doc{ID: "github__create_issue", Server: "github", Name: "create_issue", Description: "Create an issue."})
	ix.Upsert(Doc{ID: "gitlab__create_issue", Server: "gitlab", Name: "create_issue", Description: "Create an issue in a project: an issue, a bug, a task, an issue."})
	ix.Upsert(Doc{ID: "jira__issue_create", Server: "jira", Name: "issue_create", Description: "Create an issue. Create issue. Issue."})
	for q, want := range map[string]string{
		"ｇｉｔｈｕｂ＿＿ｃｒｅａｔｅ＿ｉｓｓｕｅ": "github__create_issue",
		"ｇｉｔｌａｂ＿＿ｃｒｅａｔｅ＿ｉｓｓｕｅ": "gitlab__create_issue",
	} {
		ascii := ix.Search(Query{Text: want, K: 3})
		got := ix.Search(Query{Text: q, K: 3})
		if len(got) == 0 || got[0].ID != want || fmt.Sprint(got) != fmt.Sprint(ascii) {
			t.Errorf("%s: %v, want %v (as %s)", q, got, ascii, want)
		}
	}
	ascii := ix.Search(Query{Text: "create_issue", K: 3})
	if got := ix.Search(Query{Text: "ｃｒｅａｔｅ＿ｉｓｓｕｅ", K: 3}); fmt.Sprint(got) != fmt.Sprint(ascii) {
		t.Errorf("ｃｒｅａｔｅ＿ｉｓｓｕｅ: %v, want %v (as create_issue)", got, ascii)
	}
}
