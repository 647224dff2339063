package search

import (
	"fmt"
	"strings"
	"testing"
)

// TestLongServerNameAfterCompaction: a server name of more words than a field indexes
// (maxFieldTokens) kept them all in the server's name terms, while its tools' server field
// indexed the first maxFieldTokens only: the rest were terms no tool used, which a compaction
// dropped, leaving the server's name terms pointing at no term. The next search that reranked a
// tool of that server indexed past the dictionary and panicked. Its name terms are the ones its
// tools index.
func TestLongServerNameAfterCompaction(t *testing.T) {
	words := make([]string, 0, maxFieldTokens+500)
	for i := range cap(words) {
		words = append(words, fmt.Sprintf("w%dx", i))
	}
	server := strings.Join(words, " ")
	ix := New(Config{})
	ix.Upsert(Doc{ID: "long__generate_report", Server: server, Name: "generate_report", Description: "Generate a sales report."})
	// Churn past the compaction threshold (1024 removed slots and a quarter of the live ones).
	for i := range 1500 {
		ix.Upsert(Doc{ID: fmt.Sprintf("other__t%d", i), Server: "other", Name: fmt.Sprintf("t%d", i), Description: "churn"})
	}
	for i := range 1500 {
		ix.Remove(fmt.Sprintf("other__t%d", i))
	}
	if ix.compactions == 0 {
		t.Fatal("no compaction: the test misses its path")
	}
	for _, q := range []string{"generate sales report", "sales report " + words[0], "report " + words[len(words)-1]} {
		hits := ix.Search(Query{Text: q, K: 5})
		if len(hits) == 0 || hits[0].ID != "long__generate_report" {
			t.Errorf("%q: %v, want long__generate_report first", q, hits)
		}
	}
}
