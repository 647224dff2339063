package search

import "bytes"

// stem applies the light stemmer to a lower-case ASCII word; see stemBytes.
func stem(w string) string {
	b := make([]byte, len(w), len(w)+1)
	copy(b, w)
	return string(stemBytes(b))
}

// stemBytes applies step 1 of the Porter stemmer (Porter 1980) to a
// lower-case ASCII word in place: plurals (1a), -ed/-ing with their repairs
// (1b) and y → i (1c); then step 5a (a final e) so that the plural handling
// is consistent ("caches" → "cache" → "cach" meets "cache"). It is
// deliberately light: "issues" and "issue" meet at "issu", "tracking" and
// "track" at "track", "created" and "creating" at "creat" — but it does not
// conflate words that only share a prefix (no derivational suffixes). The
// result may be one byte longer than w (hop+ing → hope), so w needs that
// capacity.
func stemBytes(w []byte) []byte {
	if len(w) <= 2 || noStem[string(w)] {
		return w
	}
	has := func(suffix string) bool { return bytes.HasSuffix(w, []byte(suffix)) }
	// Step 1a.
	switch {
	case has("sses"), has("ies"):
		w = w[:len(w)-2]
	case has("ss"), has("us"), has("is"):
		// Not plurals: class, status, analysis. (Porter strips "us" and "is";
		// keeping them whole is more conservative.)
	case has("s"):
		w = w[:len(w)-1]
	}
	// Step 1b.
	repair := false
	switch {
	case has("eed"):
		if measure(w[:len(w)-3]) > 0 {
			w = w[:len(w)-1]
		}
	case has("ed"):
		if hasVowel(w[:len(w)-2]) {
			w, repair = w[:len(w)-2], true
		}
	case has("ing"):
		if hasVowel(w[:len(w)-3]) {
			w, repair = w[:len(w)-3], true
		}
	}
	if repair {
		switch {
		case has("at"), has("bl"), has("iz"):
			w = append(w, 'e')
		case doubleConsonant(w) && !has("l") && !has("s") && !has("z"):
			w = w[:len(w)-1]
		case measure(w) == 1 && cvc(w):
			w = append(w, 'e')
		}
	}
	// Step 1c.
	if has("y") && len(w) > 2 && hasVowel(w[:len(w)-1]) {
		w[len(w)-1] = 'i'
	}
	// Step 5a.
	if has("e") {
		if m := measure(w[:len(w)-1]); m > 1 || (m == 1 && !cvc(w[:len(w)-1])) {
			w = w[:len(w)-1]
		}
	}
	return w
}

// noStem lists common words whose final s is not a plural, where stripping
// it would merge them with an unrelated word (news → new).
var noStem = map[string]bool{
	"news": true, "series": true, "species": true, "lens": true, "canvas": true,
	"alias": true, "atlas": true, "bias": true, "gas": true, "chaos": true,
	"always": true, "perhaps": true, "whereas": true, "sometimes": true,
}

// consonant reports whether w[i] is a consonant in Porter's sense.
func consonant(w []byte, i int) bool {
	switch w[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !consonant(w, i-1)
	}
	return true
}

// measure is Porter's m: the number of vowel-consonant sequences in w.
func measure(w []byte) int {
	m, i, n := 0, 0, len(w)
	for i < n && consonant(w, i) {
		i++
	}
	for i < n {
		for i < n && !consonant(w, i) {
			i++
		}
		if i >= n {
			break
		}
		for i < n && consonant(w, i) {
			i++
		}
		m++
	}
	return m
}

func hasVowel(w []byte) bool {
	for i := range w {
		if !consonant(w, i) {
			return true
		}
	}
	return false
}

func doubleConsonant(w []byte) bool {
	n := len(w)
	return n >= 2 && w[n-1] == w[n-2] && consonant(w, n-1)
}

// cvc: consonant-vowel-consonant ending, the last not w, x or y (hop → hope).
func cvc(w []byte) bool {
	n := len(w)
	if n < 3 || !consonant(w, n-1) || consonant(w, n-2) || !consonant(w, n-3) {
		return false
	}
	switch w[n-1] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}
