package suggest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// osa is the textbook optimal string alignment distance, the whole table.
func osa(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func TestWithinMatchesFullTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = "abcd"[rng.IntN(4)]
		}
		return string(b)
	}
	for range 20000 {
		a, b := word(), word()
		if rng.IntN(2) == 0 { // near misses, the interesting cases
			bb := []byte(a)
			for range rng.IntN(4) {
				if len(bb) > 0 {
					bb[rng.IntN(len(bb))] = "abcd"[rng.IntN(4)]
				}
			}
			b = string(bb)
		}
		want := osa(a, b)
		for max := range 4 {
			got, ok := Within(a, b, max)
			if ok != (want <= max) || ok && got != want {
				t.Fatalf("Within(%q, %q, %d) = %d, %v; distance %d", a, b, max, got, ok, want)
			}
			// KeyWithin compares with the key of its second argument: "a_B-c" is "abc".
			var spelled []byte
			for i := range len(b) {
				c := b[i]
				if rng.IntN(3) == 0 {
					c -= 'a' - 'A'
				}
				spelled = append(spelled, c)
				if rng.IntN(4) == 0 {
					spelled = append(spelled, "_-./"[rng.IntN(4)])
				}
			}
			if got, ok := KeyWithin(a, string(spelled), max); ok != (want <= max) || ok && got != want {
				t.Fatalf("KeyWithin(%q, %q, %d) = %d, %v; distance %d", a, spelled, max, got, ok, want)
			}
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
		ok   bool
	}{
		{"createissue", "createissue", 0, true},
		{"createissue", "creatissue", 1, true},
		{"createissue", "craeteissue", 1, true}, // a swap
		{"createissue", "createisuse", 1, true},
		{"createissue", "closeissue", 0, false},
		{"", "ab", 2, true},
		{"", "abc", 0, false},
		{"abc", "", 0, false},
	} {
		d, ok := Within(c.a, c.b, MaxDistance)
		if ok != c.ok || ok && d != c.d {
			t.Errorf("Within(%q, %q) = %d, %v; want %d, %v", c.a, c.b, d, ok, c.d, c.ok)
		}
	}
	if _, ok := Within("a", "a", -1); ok {
		t.Error("a negative max matched")
	}
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"ticketing__createIssue": "ticketingcreateissue",
		"ticketing.createissue":  "ticketingcreateissue",
		"Ticketing/create_issue": "ticketingcreateissue",
		"get-weather 2":          "getweather2",
		"获取热榜":                   "获取热榜",
		"":                       "",
		"__":                     "",
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}

// Lookup gives the names under a key sorted, whatever the order they were added and removed in
// and however many there are (it used to give a Go map: a caller stopping at a budget stopped at
// other names every time), and the names under a key are what the adds and removes leave.
func TestIndexLookupOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pairs []Pair
	for i := range 3000 {
		// Many names under one key ("x"), and pairs of names under others.
		pairs = append(pairs, Pair{Public: fmt.Sprintf("s%d__x%s", i%3, strings.Repeat("_", i/3%7)+strings.Repeat("-", i/21)), Name: "x" + strings.Repeat("_", i/3%7) + strings.Repeat("-", i/21)})
		pairs = append(pairs, Pair{Public: fmt.Sprintf("s%d__t%d", i%3, i/3), Name: fmt.Sprintf("t%d", i/3)})
	}
	var want map[string][]string
	for round := range 4 {
		var ix Index
		held, dropped := map[Pair]bool{}, map[Pair]bool{}
		order := slices.Clone(pairs)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for len(order) > 0 { // in batches of random sizes, some removed again
			n := min(len(order), 1+rng.IntN(500))
			batch := order[:n]
			order = order[n:]
			var drop []Pair
			for _, p := range pairs { // each pair dropped (and added again later) once at most
				if held[p] && !dropped[p] && rng.IntN(20) == 0 {
					drop = append(drop, p)
					dropped[p] = true
				}
			}
			for _, p := range drop {
				delete(held, p)
				order = append(order, p) // added again later
			}
			for _, p := range batch {
				held[p] = true
			}
			if round%2 == 0 {
				ix.Update(drop, batch)
			} else {
				for _, p := range drop {
					ix.Remove(p.Public, p.Name)
				}
				for _, p := range batch {
					ix.Add(p.Public, p.Name)
				}
			}
			if rng.IntN(3) == 0 { // a look-up folds in the changes of its key so far
				if got := ix.Lookup("x"); !slices.IsSorted(got) {
					t.Fatalf("round %d: names under x not sorted", round)
				}
				ix.Lookup(Key(batch[0].Name))
			}
		}
		got := map[string][]string{}
		for k, names := range ix.folded() {
			if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
				t.Fatalf("round %d: names under %q not sorted and distinct", round, k)
			}
			got[k] = names
		}
		if round == 0 {
			want = got
			if n := len(ix.Lookup("x")); n != 3000 {
				t.Fatalf("%d names under x, want 3000", n)
			}
			continue
		}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("round %d: the index differs from round 0's", round)
		}
	}
	var ix Index
	ix.Update(nil, pairs)
	ix.Update(pairs, nil)
	// Added and removed again before any look-up: no change is left recorded either.
	if p, n := len(ix.pending), len(ix.folded()); n != 0 || p != 0 {
		t.Errorf("%d keys left (%d with changes recorded) after removing every pair", n, p)
	}
}

func TestIndexAndRank(t *testing.T) {
	var ix Index
	ix.Add("ticketing__createIssue", "createIssue")
	ix.Add("ticketing__createIssue", "createIssue") // again: no change
	ix.Add("jira__create_issue", "create_issue")
	if got := ix.Lookup(Key("ticketing.createissue")); !slices.Equal(got, []string{"ticketing__createIssue"}) {
		t.Errorf("by public key: %v", got)
	}
	if got := ix.Lookup(Key("CreateIssue")); !slices.Equal(got, []string{"jira__create_issue", "ticketing__createIssue"}) {
		t.Errorf("by name key: %v", got)
	}
	ix.Remove("ticketing__createIssue", "createIssue")
	if got := ix.Lookup(Key("CreateIssue")); !slices.Equal(got, []string{"jira__create_issue"}) {
		t.Errorf("after Remove, by name key: %v", got)
	}
	if got := ix.Lookup(Key("ticketing__createIssue")); len(got) != 0 {
		t.Errorf("after Remove, by public key: %v", got)
	}
	got := Rank([]Candidate{{"b", 1}, {"a", 1}, {"z", 0}, {"a", 2}, {"c", 2}, {"d", 2}})
	if !slices.Equal(got, []string{"z", "a", "b"}) {
		t.Errorf("Rank = %v", got)
	}
	for names, want := range map[int]string{0: "", 1: "did you mean a?", 2: "did you mean a or b?", 3: "did you mean a, b or c?"} {
		if got := DidYouMean([]string{"a", "b", "c"}[:names]); got != want {
			t.Errorf("DidYouMean of %d = %q, want %q", names, got, want)
		}
	}
}

func FuzzWithin(f *testing.F) {
	f.Add("createissue", "craeteissue", 2)
	f.Fuzz(func(t *testing.T, a, b string, max int) {
		if len(a) > 40 || len(b) > 40 || max < -1 || max > 5 {
			return
		}
		want := osa(a, b)
		got, ok := Within(a, b, max)
		if ok != (want <= max) || ok && got != want {
			t.Fatalf("Within(%q, %q, %d) = %d, %v; distance %d", a, b, max, got, ok, want)
		}
	})
}

func TestServers(t *testing.T) {
	var got []string
	Servers("my-srv__create_issue", func(s, t string) bool { got = append(got, s+"|"+t); return true })
	want := []string{"my|srv__create_issue", "my-srv|create_issue", "my-srv__create|issue"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	got = nil
	Servers("a.b", func(s, t string) bool { got = append(got, s+"|"+t); return false })
	if !slices.Equal(got, []string{"a|b"}) {
		t.Errorf("stop: got %q", got)
	}
	Servers("__x__", func(s, t string) bool { t2 := s + t; got = append(got, t2); return true })
	if !slices.Equal(got, []string{"a|b"}) {
		t.Errorf("leading and trailing separators: got %q", got)
	}
}

// Lengths and Outward give the order in which the executor and the indexer look at a server's
// tools (one helper for both: their suggestions agree).
func TestLengthsAndOutward(t *testing.T) {
	if got := slices.Collect(Lengths(5)); !slices.Equal(got, []int{5, 4, 6, 3, 7}) {
		t.Errorf("Lengths(5) = %v", got)
	}
	if got := slices.Collect(Lengths(1)); !slices.Equal(got, []int{1, 0, 2, 3}) {
		t.Errorf("Lengths(1) = %v", got)
	}
	if got := slices.Collect(Outward(2, 4, 7)); !slices.Equal(got, []int{4, 3, 5, 2, 6}) {
		t.Errorf("Outward(2, 4, 7) = %v", got)
	}
	if got := slices.Collect(Outward(0, 3, 3)); !slices.Equal(got, []int{2, 1, 0}) {
		t.Errorf("Outward(0, 3, 3) = %v", got)
	}
	for range Outward(0, 0, 0) {
		t.Error("Outward of an empty run yielded")
	}
}

// folded folds every key's changes in and returns byKey.
func (ix *Index) folded() map[string][]string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for k := range ix.pending {
		ix.fold(k)
	}
	return ix.byKey
}

// TestIndexHeldNamesCostNoMapOfChanges: most keys hold one name or a few (every public name's
// own key, an original name of one server) and are never looked up. An Index that recorded the
// changes of every key in a map of its own until its next Lookup kept that map for each of them
// for good: about 350 bytes per pair held, where the names themselves take about 110 (3×
// the memory for the tools of thousands of servers). The index's heap per pair held without a
// look-up stays near the names'.
func TestIndexHeldNamesCostNoMapOfChanges(t *testing.T) {
	const servers, tools = 200, 100
	var adds [][]Pair
	for s := range servers {
		var add []Pair
		for i := range tools {
			n := fmt.Sprintf("tool_%d", i)
			add = append(add, Pair{Public: fmt.Sprintf("srv%d__%s", s, n), Name: n})
		}
		adds = append(adds, add)
	}
	var ix Index
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, add := range adds {
		ix.Update(nil, add)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPair := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / (servers * tools)
	runtime.KeepAlive(adds)
	t.Logf("%d bytes of heap per pair held", perPair)
	if perPair > 200 {
		t.Errorf("the index holds %d bytes per pair, want about the names' (110): a map of changes kept per key never looked up", perPair)
	}
	// What it holds is what was added.
	if got := ix.Lookup(Key("srv7__tool_3")); !slices.Equal(got, []string{"srv7__tool_3"}) {
		t.Errorf("names under srv7__tool_3's key: %v", got)
	}
	if got := ix.Lookup(Key("tool_3")); len(got) != servers || !slices.IsSorted(got) {
		t.Errorf("%d names under tool_3's key, want %d sorted", len(got), servers)
	}
	runtime.KeepAlive(&ix)
}
