package search

import (
	"slices"
	"testing"
)

// TestTokenizeSpacingMarks: the vowel signs of Indic scripts are combining marks too, most of
// them spacing (category Mc: ा, ो, ी). They continue a word as the nonspacing ones (Mn) do:
// खोजें (search) is one word, not ख and जें, and फ़ाइल (file) is not फ़ and इल, which इलाज
// (treatment) would match through इल.
func TestTokenizeSpacingMarks(t *testing.T) {
	for in, want := range map[string][]string{
		"खोजें":       {"खोजें"},
		"फ़ाइल पढ़ें": {"फ़ाइल", "पढ़ें"},
		"தேடல்":       {"தேடல்"}, // Tamil: ே and ் are Mc and Mn
		"ফাইল":        {"ফাইল"},  // Bengali
	} {
		if got := Tokenize(in); !slices.Equal(got, want) {
			t.Errorf("Tokenize(%q) = %q, want %q", in, got, want)
		}
	}
	ix := New(Config{})
	ix.Upsert(Doc{ID: "hi__read", Server: "hi", Name: "read", Description: "फ़ाइल पढ़ें"})
	ix.Upsert(Doc{ID: "hi__search", Server: "hi", Name: "search", Description: "वेब पर खोजें"})
	if hits := ix.Search(Query{Text: "इलाज"}); len(hits) != 0 {
		t.Errorf("इलाज (treatment), a word of no tool: got %v", hits)
	}
	if hits := ix.Search(Query{Text: "फ़ाइल"}); len(hits) != 1 || hits[0].ID != "hi__read" {
		t.Errorf("फ़ाइल (file): got %v, want hi__read", hits)
	}
}

// TestTokenizeInvisibleFormatCharacters: invisible format characters inside a word (a soft
// hyphen, as text copied from web pages and PDFs has them; a zero-width joiner or non-joiner;
// a word joiner; a byte order mark; bidi marks) do not split it: the word reads as it shows
// (UAX #29 ignores them between letters). A zero-width space is a word break, as in Thai.
func TestTokenizeInvisibleFormatCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"docu\u00ADment":    "document",
		"mark\u200Ddown":    "markdown",
		"spread\u200Csheet": "spreadsheet",
		"re\u2060port":      "report",
		"\uFEFFsearch":      "search",
		"pay\u200Ement":     "payment",
		"搜\u200D索":          "搜索",
	} {
		if got, w := Tokenize(in), Tokenize(want); !slices.Equal(got, w) {
			t.Errorf("Tokenize(%q) = %q, want %q as for %q", in, got, w, want)
		}
	}
	if got, want := Tokenize("search\u200Bfiles"), []string{"search", "file"}; !slices.Equal(got, want) {
		t.Errorf("zero-width space: Tokenize = %q, want %q", got, want)
	}
	ix := newSmall(t)
	ix.Upsert(Doc{ID: "conv__transmute", Server: "conv", Name: "transmute",
		Description: "Turns a docu\u00ADment into Mark\u00ADdown."})
	if hits := ix.Search(Query{Text: "document markdown"}); len(hits) == 0 || hits[0].ID != "conv__transmute" {
		t.Errorf("got %v, want conv__transmute first", ids(hits))
	}
}

// TestTokenizeCaseFolding: case differences are no word differences beyond ASCII either: the
// Greek final sigma (ς) is the lower case of Σ at the end of a word, so ΟΔΟΣ is οδος; and a
// word that lower-cases to ASCII (FİLES, with the Turkish dotted capital I; the Kelvin sign
// K) is an ASCII word, stemmed and filtered as one.
func TestTokenizeCaseFolding(t *testing.T) {
	for a, b := range map[string]string{
		"ΟΔΟΣ ΑΝΑΖΗΤΗΣΗΣ": "οδος αναζητησης",
		"FİLES":           "files",
		"\u212Aubernetes": "Kubernetes",
		"ſearch":          "search", // long s
	} {
		if ta, tb := Tokenize(a), Tokenize(b); !slices.Equal(ta, tb) {
			t.Errorf("Tokenize(%q) = %q, Tokenize(%q) = %q: want the same terms", a, ta, b, tb)
		}
	}
	ix := New(Config{})
	ix.Upsert(Doc{ID: "gr__street", Server: "gr", Name: "street", Description: "ΑΝΑΖΗΤΗΣΗ ΟΔΟΣ"})
	ix.Upsert(Doc{ID: "gr__other", Server: "gr", Name: "other", Description: "Καιρός"})
	if hits := ix.Search(Query{Text: "οδος"}); len(hits) != 1 || hits[0].ID != "gr__street" {
		t.Errorf("οδος: got %v, want gr__street", hits)
	}
}

// TestExactMentionWithMarks: an exact mention of a multi-word original name is read as one
// when its words have combining marks (Indic vowel signs), as it is when they have none: the
// query's identifier-like chunks are cut where its words are, not inside them.
func TestExactMentionWithMarks(t *testing.T) {
	cfg := resolve(Config{})
	for _, name := range []string{"वेब_खोजें", "e\u0301criture_fichier", "தேடல்_கோப்பு"} {
		key := nameKey(name)
		if key == "" {
			t.Fatalf("nameKey(%q) is empty: not a multi-word name", name)
		}
		pq := cfg.parseQuery("please run " + name + " now")
		if !slices.Contains(pq.chunks, key) {
			t.Errorf("query naming %q: chunks %q, want %q among them", name, pq.chunks, key)
		}
		pq.release()
	}
}
