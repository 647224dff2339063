package suggest

import (
	"iter"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxDistance is the largest edit distance (insertions, deletions, substitutions and swaps of
// two adjacent characters, on keys) at which a tool of the named server is suggested.
const MaxDistance = 2

// MaxGiven is the longest given name that is looked at (in bytes); a longer one gets no
// suggestion. Public names have at most 64 characters.
const MaxGiven = 256

// Limit is how many names Suggest returns at most.
const Limit = 3

// Key is s with its ASCII letters lowercased, its digits kept and its other ASCII bytes
// (separators, punctuation) dropped: "ticketing__createIssue", "ticketing.createissue" and
// "Ticketing/create_issue" have one key. Characters outside ASCII are kept as they are.
func Key(s string) string { return string(appendKey(make([]byte, 0, len(s)), s)) }

// appendKey appends the key of s to dst.
func appendKey(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c >= utf8.RuneSelf:
			dst = append(dst, c)
		case c >= 'A' && c <= 'Z':
			dst = append(dst, c+'a'-'A')
		}
	}
	return dst
}

// KeyWithin is Within(key, Key(name), max) without building name's key on the heap: a caller
// comparing one key with many names pays no allocation per name.
func KeyWithin(key, name string, max int) (int, bool) {
	if len(name) < len(key)-max {
		return 0, false // a key is never longer than its name
	}
	var buf [128]byte
	return within(key, appendKey(buf[:0], name), max)
}

// Within reports the edit distance of a and b (optimal string alignment: insertions, deletions,
// substitutions and adjacent swaps, on bytes) when it is at most max, and false when it is more.
// It costs O(len(a)·(2·max+1)): only the band |i−j| ≤ max of the table is computed.
func Within(a, b string, max int) (int, bool) { return within(a, b, max) }

func within[B string | []byte](a string, b B, max int) (int, bool) {
	if max < 0 {
		return 0, false
	}
	if d := len(a) - len(b); d > max || -d > max {
		return 0, false
	}
	if a == string(b) {
		return 0, true
	}
	// No distance exceeds len(a)+len(b): a larger max (math.MaxInt, for no bound) would
	// overflow the band's edge i+max.
	max = min(max, len(a)+len(b))
	const inf = 1 << 30
	// rows[i%3][j] is the distance of a[:i] and b[:j]. Each row sets the cells on both sides of
	// its band to inf, which is all that the next two rows read outside their own bands.
	n := len(b)
	var rows [3][]int
	var stack [3][72]int // no allocation for the names of tools (at most 64 characters)
	for r := range rows {
		if n+2 <= len(stack[r]) {
			rows[r] = stack[r][:n+2]
		} else {
			rows[r] = make([]int, n+2)
		}
	}
	for j := range rows[0] {
		rows[0][j] = inf
		if j <= max && j <= n {
			rows[0][j] = j
		}
	}
	for i := 1; i <= len(a); i++ {
		cur, prev, prev2 := rows[i%3], rows[(i-1)%3], rows[(i+1)%3]
		lo, hi := i-max, min(n, i+max)
		best := inf
		if lo <= 0 {
			lo, cur[0], best = 1, i, i
		} else {
			cur[lo-1] = inf
		}
		cur[hi+1] = inf
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
			best = min(best, d)
		}
		if best > max {
			return 0, false
		}
	}
	d := rows[len(a)%3][n]
	return d, d <= max
}

// Index maps the keys of public names, and of the original names they stand for, to the public
// names, in order: a look-up gives the names under a key sorted, so that a caller that stops
// early (a budget) stops at the same names however and in whatever order they were added. Its
// owner removes the names no longer listed, so that what it holds is what is listed now.
//
// The names under a key are kept as a sorted slice, replaced (never changed in place) when the
// changes made to the key since are folded in: by the first Lookup of the key after them, which
// costs the names under it plus the sorting of those added. An Update changes a key of fewer
// than fewNames names at once (copying them) and only records what it changes under a key of
// more (a map write per pair and key, and a binary search of the names held): many servers
// list a tool of one name (search, fetch), each adding its public name under that name's key,
// and an index that merged each Update at once copied every name under the key for each, n²/2
// names for n servers replayed at start. Changes recorded and not looked up are only those that
// change what the key holds (a name added then removed again leaves nothing), and only under
// the few keys of many names.
type Index struct {
	// mu guards byKey and pending: Lookup folds pending changes in, and its owner may call it
	// under a read lock of its own, from several goroutines at once.
	mu    sync.Mutex
	byKey map[string][]string
	// pending holds, per key of many names, the changes recorded under it (see set).
	pending map[string]*changes
}

// Pair is a tool's public name and its original name on its server.
type Pair struct{ Public, Name string }

// keys returns the keys p is indexed under (one or two; none for empty keys).
func (p Pair) keys() []string {
	a, b := Key(p.Public), Key(p.Name)
	switch {
	case a == "" && b == "":
		return nil
	case a == "" || a == b:
		return []string{b}
	case b == "":
		return []string{a}
	}
	return []string{a, b}
}

// Update removes the pairs of remove, then adds those of add: each public name under its key
// and the key of its original name. Adding a pair again, or removing one not held, changes
// nothing. The changes to a key of many names are folded in by its next Lookup (see Index).
func (ix *Index) Update(remove, add []Pair) {
	if len(remove) == 0 && len(add) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.byKey == nil {
		ix.byKey, ix.pending = map[string][]string{}, map[string]*changes{}
	}
	for _, p := range remove {
		for _, k := range p.keys() {
			ix.set(k, p.Public, false)
		}
	}
	for _, p := range add {
		for _, k := range p.keys() {
			ix.set(k, p.Public, true)
		}
	}
}

// fewNames bounds the names of a key that an Update changes at once, in a new slice (copying
// at most that many), rather than recording the change: most keys hold one name or a few (a
// public name's own key, an original name of one server) and are never looked up, and a map
// of changes kept for each of them until a Lookup took three times the memory of the names.
// Recorded changes that leave a key this few names are folded in at once (once: the key then
// holds few).
const fewNames = 32

// changes are the changes recorded under a key: the public names whose presence under it
// differs from byKey's (true to add, false to drop), and how many more they add than drop.
type changes struct {
	held map[string]bool
	net  int
}

// set records that public is (held) or is not under k (ix.mu held): a change only where that
// differs from what byKey holds. Under a key of fewer than fewNames names and no change
// recorded, the change is made at once.
func (ix *Index) set(k, public string, held bool) {
	old := ix.byKey[k]
	at, in := slices.BinarySearch(old, public)
	ch := ix.pending[k]
	if ch == nil && len(old) < fewNames {
		if in == held {
			return
		}
		out := make([]string, 0, len(old)+1) // never in place: see Lookup
		out = append(out, old[:at]...)
		if held {
			out = append(out, public)
			out = append(out, old[at:]...)
		} else {
			out = append(out, old[at+1:]...)
		}
		if len(out) == 0 {
			delete(ix.byKey, k)
		} else {
			ix.byKey[k] = out
		}
		return
	}
	step := func(held bool) int {
		if held {
			return 1
		}
		return -1
	}
	if in == held {
		if ch != nil {
			if was, ok := ch.held[public]; ok {
				delete(ch.held, public)
				ch.net -= step(was)
				if len(ch.held) == 0 {
					delete(ix.pending, k)
				}
			}
		}
	} else {
		if ch == nil {
			ch = &changes{held: map[string]bool{}}
			ix.pending[k] = ch
		}
		if _, ok := ch.held[public]; !ok { // (else recorded already: held differs from in once)
			ch.held[public] = held
			ch.net += step(held)
		}
	}
	if ch != nil && ix.pending[k] == ch && len(old)+ch.net <= fewNames {
		ix.fold(k)
	}
}

// fold merges the pending changes of k into byKey (ix.mu held), in a new slice.
func (ix *Index) fold(k string) {
	pc := ix.pending[k]
	if pc == nil {
		return
	}
	delete(ix.pending, k)
	ch := pc.held
	var add []string
	for p, held := range ch {
		if held {
			add = append(add, p) // not under k: see set
		}
	}
	slices.Sort(add)
	old := ix.byKey[k]
	out := make([]string, 0, len(old)+len(add))
	i := 0
	for _, p := range old {
		if held, ok := ch[p]; ok && !held {
			continue
		}
		for i < len(add) && add[i] < p {
			out = append(out, add[i])
			i++
		}
		out = append(out, p)
	}
	out = append(out, add[i:]...)
	if len(out) == 0 {
		delete(ix.byKey, k)
	} else {
		ix.byKey[k] = out
	}
}

// Add indexes public (the tool's public name) under its key and the key of name (its original
// name on its server): Update(nil, {{public, name}}).
func (ix *Index) Add(public, name string) { ix.Update(nil, []Pair{{public, name}}) }

// Remove undoes Add(public, name): Update({{public, name}}, nil).
func (ix *Index) Remove(public, name string) { ix.Update([]Pair{{public, name}}, nil) }

// Lookup returns the public names indexed under key, sorted (shared: do not modify; a later
// change replaces it rather than changing it, so a caller may keep ranging over it after
// releasing its owner's lock), folding in the changes made under key since its last look-up.
// Its size is not bounded: a caller with a budget stops ranging over it when the budget is
// spent, and, the order being the names', stops at the same names on every replica and for
// every request. A caller that spends its budget only on the names it may offer (asking what
// the caller may see first) offers the same names whatever else is indexed.
func (ix *Index) Lookup(key string) []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.fold(key)
	return ix.byKey[key]
}

// Lengths yields the key lengths a key of length n can be within MaxDistance edits of, nearest
// first: n, n−1, n+1, n−2, n+2, … (none below 0). A caller that looks at a server's tools by
// length (its keys sorted by length, then key) stops at the same tools on every replica.
func Lengths(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		if !yield(n) {
			return
		}
		for d := 1; d <= MaxDistance; d++ {
			if n-d >= 0 && !yield(n-d) {
				return
			}
			if !yield(n + d) {
				return
			}
		}
	}
}

// Outward yields lo ≤ i < hi by distance from at (at, at−1, at+1, at−2, …): the entries of a
// sorted run from those that sort nearest a given one (at, where it would be inserted).
func Outward(lo, at, hi int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for d := 0; at+d < hi || at-1-d >= lo; d++ {
			if at+d < hi && !yield(at+d) {
				return
			}
			if at-1-d >= lo && !yield(at-1-d) {
				return
			}
		}
	}
}

// Candidate is a suggested public name and how far it is from the given name (0: the same key).
type Candidate struct {
	Public string
	Dist   int
}

// Rank sorts candidates by distance then name, drops repeated names and keeps at most Limit.
func Rank(c []Candidate) []string {
	slices.SortFunc(c, func(a, b Candidate) int {
		if a.Dist != b.Dist {
			return a.Dist - b.Dist
		}
		return strings.Compare(a.Public, b.Public)
	})
	var out []string
	for _, x := range c {
		if len(out) == Limit {
			break
		}
		if !slices.Contains(out, x.Public) {
			out = append(out, x.Public)
		}
	}
	return out
}

// DidYouMean is the question a not_found message adds for names ("did you mean a, b or c?"),
// or "" for none.
func DidYouMean(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "did you mean " + names[0] + "?"
	}
	return "did you mean " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + "?"
}

// Servers calls yield with each way of reading given as a server name and a tool name: the
// server is a prefix of given that ends where a separator ('_', '.', '/', ':', '-' or a space)
// begins, and the tool name is what follows the separators. "ticketing__create", "ticketing.create"
// and "ticketing/create" all yield ("ticketing", "create"). It stops when yield returns false.
func Servers(given string, yield func(server, tool string) bool) {
	if len(given) > MaxGiven {
		return
	}
	for i := 1; i < len(given); i++ {
		if !isSep(given[i]) || isSep(given[i-1]) {
			continue
		}
		j := i
		for j < len(given) && isSep(given[j]) {
			j++
		}
		if j < len(given) && !yield(given[:i], given[j:]) {
			return
		}
	}
}

func isSep(c byte) bool {
	switch c {
	case '_', '.', '/', ':', '-', ' ':
		return true
	}
	return false
}
