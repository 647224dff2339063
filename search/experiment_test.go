//go:build searchexp

// Ranking experiments and diagnostics, not tests: run with
// go test -tags searchexp ./search -run 'Experiments|Diag' (and SEARCH_EXPERIMENTS=1, SEARCH_DIAG=1, SEARCH_Q=...).

package search

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestExperiments prints ablations of the ranking features on queries-dev.
// It runs only with SEARCH_EXPERIMENTS=1 (=detail adds each query's top 10).
func TestExperiments(t *testing.T) {
	if os.Getenv("SEARCH_EXPERIMENTS") == "" {
		t.Skip("set SEARCH_EXPERIMENTS=1 to run")
	}
	tools, queries := loadEval(t)
	off := -1.0
	plain := Config{Fields: FieldWeights{Name: 1, Title: 1, Lead: 1, Description: 1, Params: 1, Server: off, Tags: 1},
		ServerWeight: off, ServerCoverageWeight: off, ServerNameWeight: off, SynonymWeight: off,
		TranslationWeight: off, NameCoverageWeight: off, ProximityWeight: off, FileIntentWeight: off}
	variants := []struct {
		name string
		cfg  Config
	}{
		{"plain BM25 (one field weight, no extras)", plain},
		{"default", Config{}},
		{"- field weights (all 1)", Config{Fields: FieldWeights{Name: 1, Title: 1, Lead: 1, Description: 1, Params: 1, Server: 1, Tags: 1}}},
		{"- lead field (lead weighs as desc)", Config{Fields: FieldWeights{Lead: 1}}},
		{"- server-name field", Config{Fields: FieldWeights{Server: off}}},
		{"- server description", Config{ServerWeight: off}},
		{"- server coverage", Config{ServerCoverageWeight: off}},
		{"- server name coverage", Config{ServerNameWeight: off}},
		{"- synonyms", Config{SynonymWeight: off}},
		{"- translations", Config{TranslationWeight: off}},
		{"translations at 0.5", Config{TranslationWeight: 0.5}},
		{"- name coverage", Config{NameCoverageWeight: off}},
		{"- name proximity", Config{ProximityWeight: off}},
		{"- file intent", Config{FileIntentWeight: off}},
		{"file intent keeps its words", Config{FileIntentKeepsWords: true}},
		{"- translations, file intent keeps words", Config{TranslationWeight: off, FileIntentKeepsWords: true}},
		// The file operation takes a place of its own; its words may also
		// be added to the query (the earlier design, at weight 1).
		{"+ file intent words at 0.5", Config{FileIntentWeight: 0.5}},
		{"+ file intent words at 1", Config{FileIntentWeight: 1}},
		{"+ file intent words at 1.5", Config{FileIntentWeight: 1.5}},
	}
	for _, v := range variants {
		m, _ := runEval(tools, queries, v.cfg)
		t.Logf("%-40s %s", v.name, fmtMetrics(m))
	}
	if os.Getenv("SEARCH_EXPERIMENTS") == "detail" {
		_, res := runEval(tools, queries, Config{})
		for i, q := range queries {
			gold := map[string]bool{}
			for _, g := range q.GoldGroups {
				for _, id := range g {
					gold[publicName(id)] = true
				}
			}
			var b strings.Builder
			for r, id := range res[i] {
				mark := " "
				if gold[id] {
					mark = "*"
				}
				b.WriteString(mark)
				b.WriteString(id)
				if r == 4 {
					b.WriteString(" |")
				}
			}
			q := q.Query
			if len(q) > 90 {
				q = q[:90]
			}
			t.Logf("%q\n   gold %v\n   got %s", q, joinGroups(queries[i].GoldGroups), b.String())
		}
	}
}

func joinGroups(g [][]string) string {
	var parts []string
	for _, x := range g {
		parts = append(parts, strings.Join(x, "|"))
	}
	return strings.Join(parts, ", ")
}

// TestDiagRanks prints, per dev query, the rank of each gold group's best
// member in the top 200 (0: not found). It runs only with SEARCH_DIAG=1.
func TestDiagRanks(t *testing.T) {
	if os.Getenv("SEARCH_DIAG") == "" {
		t.Skip("set SEARCH_DIAG=1 to run")
	}
	tools, queries := loadEval(t)
	ix := New(Config{})
	for _, d := range catalogDocs(tools, "") {
		ix.Upsert(d)
	}
	hist := map[string]int{}
	for _, q := range queries {
		hits := ix.Search(Query{Text: q.Query, K: 200})
		rank := map[string]int{}
		for i, h := range hits {
			rank[h.ID] = i + 1
		}
		var line []string
		for _, g := range q.GoldGroups {
			best := 0
			for _, id := range g {
				if r := rank[publicName(id)]; r > 0 && (best == 0 || r < best) {
					best = r
				}
			}
			switch {
			case best == 0:
				hist["none"]++
			case best <= 5:
				hist["1-5"]++
			case best <= 10:
				hist["6-10"]++
			case best <= 20:
				hist["11-20"]++
			case best <= 50:
				hist["21-50"]++
			default:
				hist["51+"]++
			}
			line = append(line, fmt.Sprint(best))
		}
		t.Logf("%-60.60q %v", q.Query, line)
	}
	t.Logf("%v", hist)
}

// TestDiagQuery explains one query (SEARCH_Q=...) on the real catalog: its
// terms with weights and document frequencies, then the top tools with the
// per-field frequencies of the terms they match (name, title, lead,
// description, params, server, tags).
func TestDiagQuery(t *testing.T) {
	q := os.Getenv("SEARCH_Q")
	if q == "" {
		t.Skip("set SEARCH_Q to a query to run")
	}
	tools, _ := loadEval(t)
	ix := New(Config{})
	for _, d := range catalogDocs(tools, "") {
		ix.Upsert(d)
	}
	pq := ix.cfg.parseQuery(q)
	for _, qt := range pq.terms {
		id, ok := ix.dict[qt.text]
		df := 0
		if ok {
			df = len(ix.terms[id].post)
		}
		t.Logf("term %-15s w %.2f main %v df %d", qt.text, qt.w, qt.main, df)
	}
	for i, h := range ix.Search(Query{Text: q, K: 15}) {
		slot := ix.byID[h.ID]
		var parts []string
		for _, qt := range pq.terms {
			id, ok := ix.dict[qt.text]
			if !ok {
				continue
			}
			for _, p := range ix.terms[id].post {
				if p.doc == slot {
					var tf [numFields]uint32
					for f := range numFields {
						tf[f] = (p.tf >> (4 * f)) & maxFieldTF
					}
					parts = append(parts, fmt.Sprintf("%s%v", qt.text, tf))
				}
			}
		}
		t.Logf("%2d %-55s %7.3f %s", i+1, h.ID, h.Score, strings.Join(parts, " "))
	}
}
