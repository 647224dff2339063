package search

import (
	"encoding/json"
	"testing"
)

// FuzzSearch indexes a tool built from arbitrary strings beside a slice of the real catalog,
// then searches arbitrary text: no input may panic, results are at most K, distinct and best
// first, and once the tool is removed no search finds it.
func FuzzSearch(f *testing.F) {
	tools, qs := loadEval(f)
	base := catalogDocs(tools[:200], "")
	byID := map[string]Doc{}
	ix := New(Config{})
	for _, d := range base {
		ix.Upsert(d)
		byID[d.ID] = d
	}
	for _, q := range qs[:10] {
		f.Add(q.Query, "srv", "tool_name", "Does things.", "param", `{"type":"object"}`, 5)
	}
	f.Add("", "", "", "", "", "", 0)
	f.Add("write /root/a.md then read b.txt and 获取热榜", "文件", "readFile", "读取文件 read a file", "path", `{"properties":{"path":{"description":"p","enum":["a","b"]}}}`, 200)
	f.Add("a__b select:a__b", "a", "b", "x", "", `[]`, -3)
	f.Add("\xff\xfe camelCaseName snake_case kebab-case", "s", "t\u0000", "\x00", "\xff", `{"properties":{"":{}}}`, 1<<30)
	f.Add(base[0].ID, base[0].Server, base[0].Name, "replaces a tool of the catalog", "", "", 3)
	f.Fuzz(func(t *testing.T, query, server, name, desc, param, schema string, k int) {
		id := server + "__" + name
		params := append(ParamsFromSchema(json.RawMessage(schema)), Param{Name: param, Description: desc})
		ix.Upsert(Doc{ID: id, Server: server, ServerDescription: desc, Name: name, Title: name, Description: desc, Params: params, Tags: []string{param}})
		want := k
		if want <= 0 {
			want = 10
		}
		want = min(want, 200)
		check := func(hits []Hit) {
			t.Helper()
			if len(hits) > want {
				t.Fatalf("%d hits for K=%d", len(hits), k)
			}
			seen := map[string]bool{}
			for i, h := range hits {
				if seen[h.ID] {
					t.Fatalf("%s returned twice", h.ID)
				}
				seen[h.ID] = true
				if i > 0 && h.Score > hits[i-1].Score {
					t.Fatalf("hit %d scores %v above the one before (%v)", i, h.Score, hits[i-1].Score)
				}
			}
		}
		check(ix.Search(Query{Text: query, K: k}))
		check(ix.Search(Query{Text: id, K: k}))
		ix.Remove(id)
		for _, q := range []string{query, id, name, desc} {
			for _, h := range ix.Search(Query{Text: q, K: k}) {
				if h.ID == id {
					t.Fatalf("removed tool %q still found", id)
				}
			}
		}
		if d, ok := byID[id]; ok {
			ix.Upsert(d) // the catalog's own tool, replaced above: restore it
		}
		if ix.Len() != len(base) {
			t.Fatalf("index holds %d tools, want %d", ix.Len(), len(base))
		}
	})
}
