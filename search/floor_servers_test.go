package search

import (
	"fmt"
	"strings"
	"testing"
)

// In a small catalog a word that picks out one server's tools is common by count ("knowledge" in
// the four tools of a knowledge base, among 11 tools of three servers: an IDF under the floor of
// 1): the floor stays below the IDF of a word in as many tools as a server has on average.
func TestFloorKeepsOneServersWord(t *testing.T) {
	ix := New(Config{})
	for i, name := range []string{"search_knowledge_base", "get_document", "summarize_document", "list_categories"} {
		ix.Upsert(Doc{ID: "kb__" + name, Server: "kb", ServerDescription: "Company knowledge base: policies and FAQs.", Name: name,
			Description: fmt.Sprintf("Knowledge base operation %d on documents: refund policy, travel, security.", i)})
	}
	for _, name := range []string{"createIssue", "listIssues", "closeIssue", "assignIssue"} {
		ix.Upsert(Doc{ID: "ticketing__" + name, Server: "ticketing", ServerDescription: "Issue tracker.", Name: name,
			Description: "Work with issues in the tracker."})
	}
	for _, name := range []string{"tail_logs", "search_logs", "count_errors"} {
		ix.Upsert(Doc{ID: "logging__" + name, Server: "logging", ServerDescription: "Application logs.", Name: name,
			Description: "Read application log lines."})
	}
	for _, q := range []string{"knowledge", "refund"} {
		hits := ix.Search(Query{Text: q})
		if len(hits) != 4 {
			t.Errorf("Search(%q) = %v, want the 4 kb tools", q, ids(hits))
		}
		for _, h := range hits {
			if !strings.HasPrefix(h.ID, "kb__") {
				t.Errorf("Search(%q) returned %s", q, h.ID)
			}
		}
	}
	// A word in most of the catalog still says nothing.
	for i := range 6 {
		ix.Upsert(Doc{ID: fmt.Sprintf("misc__t%d", i), Server: fmt.Sprintf("misc%d", i), Name: fmt.Sprintf("t%d", i),
			Description: "Knowledge of knowledge: a generic knowledge tool."})
	}
	if hits := ix.Search(Query{Text: "knowledge"}); len(hits) != 0 {
		t.Errorf("a word in 10 of 17 tools returned %v", ids(hits))
	}
}
