package search

import (
	"fmt"
	"testing"
)

// TestStatsMemoBounded: the statistics of visibility classes remember document frequencies
// within one bound over every class. Classes come from what requests name (roles, users), and
// words from their queries: a client cycling through role sets and words used to make every
// one of maxStatsKeys classes remember maxDFMemo frequencies, about 600 MB in all.
func TestStatsMemoBounded(t *testing.T) {
	const tools = 2 * maxDFMemoTotal / maxStatsKeys // so that maxStatsKeys classes overflow the bound
	ix := New(Config{})
	word := func(i int) string { // a word of consonants per tool: no stemming applies
		const letters = "bcfghjkmnpqrtvwxz"
		w := "zz"
		for ; i > 0; i /= len(letters) {
			w += string(letters[i%len(letters)])
		}
		return w
	}
	for i := range tools {
		ix.Upsert(Doc{ID: fmt.Sprintf("s__t%d", i), Server: "s", Name: fmt.Sprintf("t%d", i), Description: word(i)})
	}
	var terms []uint32
	ix.mu.RLock()
	for _, id := range ix.dict {
		terms = append(terms, id)
	}
	ix.mu.RUnlock()
	if len(terms) < tools {
		t.Fatalf("%d terms, want at least %d", len(terms), tools)
	}
	even := func(id string) bool { return id[len(id)-1]%2 == 0 }
	for c := range maxStatsKeys + 10 {
		ix.mu.RLock()
		st := ix.statsFor(fmt.Sprintf("class %d", c), even)
		for _, id := range terms {
			ix.df(st, id)
		}
		ix.mu.RUnlock()
	}
	ix.visStats.mu.Lock()
	defer ix.visStats.mu.Unlock()
	sum := 0
	for _, st := range ix.visStats.m {
		sum += len(st.df)
	}
	if sum > maxDFMemoTotal || sum != ix.visStats.memo {
		t.Errorf("classes remember %d frequencies (counted %d), want at most %d", sum, ix.visStats.memo, maxDFMemoTotal)
	}
	if len(ix.visStats.m) > maxStatsKeys {
		t.Errorf("%d classes kept, want at most %d", len(ix.visStats.m), maxStatsKeys)
	}
}
