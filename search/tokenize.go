package search

import (
	"strings"
	"unicode"
	"unicode/utf8"

	unorm "golang.org/x/text/unicode/norm"
)

// Tokenizer limits. Text beyond them is ignored, never an error: tool
// descriptions come from third-party servers and may be hostile.
const (
	// maxFieldBytes bounds the bytes of one field that are tokenized.
	maxFieldBytes = 64 << 10
	// maxQueryBytes bounds the bytes of a query that are tokenized.
	maxQueryBytes = 8 << 10
	// maxTokenBytes bounds a term: a longer alphanumeric run is split into its
	// words (see emitWord) or, a blob (hashes, base64), dropped.
	maxTokenBytes = 48
)

// Tokenize returns the index terms of text, in order, as both documents and
// queries see them: in Unicode normalization form C (e + U+0301 is é);
// case-folded (lower-cased, ς as σ); split on anything that is not a letter,
// digit or combining mark (invisible format characters such as a soft hyphen
// or a zero-width joiner are skipped, a zero-width space is a break), on
// camelCase and on letter/digit boundaries (getLogs → get, log;
// search_knowledge_base → search, knowledg, base); fullwidth forms of ASCII
// (ＰＤＦ) read as ASCII; English stop words and one-character Latin tokens
// dropped; a conservative suffix stemmer (Porter step 1: plurals, -ed, -ing)
// applied to ASCII words; runs of CJK characters
// (Han, Hiragana, Katakana, Hangul) emitted as unigrams plus overlapping
// bigrams. An alphanumeric run that was split also yields its joined form
// (getLogs → get, log, getlog) so a query that spells it as one word matches,
// and the short identifiers inside it (listS3Buckets → s3), as written alone.
func Tokenize(text string) []string {
	var out []string
	tokenize(text, maxFieldBytes, func(tok string, _ termKind) { out = append(out, tok) })
	return out
}

// termKind tells what a term emitted by tokenize stands for.
type termKind uint8

const (
	termWord   termKind = iota // a word of the text
	termJoined                 // a short identifier inside a split run (listS3Buckets → s3), or a split run joined (s3, lists3bucket)
	// termAlias is the joined form of a split run each of whose parts is a word of its own
	// (getLogs → getlog, beside get and log): another spelling of those words, not one more.
	termAlias
)

// tokenize calls emit for every term of text (up to limit bytes). A term of
// another kind than termWord is the joined form of a split run or a short
// identifier inside one; such terms are searchable but do not count as
// separate words for proximity purposes.
func tokenize(text string, limit int, emit func(tok string, k termKind)) {
	if len(text) > limit {
		// Cut at a rune boundary.
		i := limit
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text = text[:i]
	}
	text = nfc(text)
	var stack [64]rune
	buf := stack[:0] // current run
	runKind := kindOther
	flush := func() {
		switch runKind {
		case kindWord:
			emitWord(buf, emit)
		case kindCJK:
			emitCJK(buf, emit)
		}
		buf = buf[:0]
		runKind = kindOther
	}
	for _, r := range text {
		if isFullwidth(r) {
			r -= 0xFEE0 // fullwidth ASCII (ＰＤＦ, ３, typed by CJK input methods) is ASCII
		}
		k := classify(r)
		if k == kindIgnore {
			continue // invisible inside a word: docu\u00ADment is document
		}
		if k == kindMark {
			// Combining marks continue a word (é spelled e + U+0301).
			if runKind == kindWord {
				buf = append(buf, r)
			}
			continue
		}
		if k == kindLetter || k == kindDigit {
			k = kindWord
			if runKind == kindJunk {
				continue
			}
		}
		if k != runKind {
			flush()
		}
		if k == kindOther {
			continue
		}
		runKind = k
		buf = append(buf, r)
		if len(buf) > 4*maxTokenBytes && k == kindWord {
			// A pathological run: drop it, keep scanning.
			buf = buf[:0]
			runKind = kindJunk
		}
	}
	flush()
}

// nfc returns s in Unicode normalization form C: accents spelled as combining marks (e +
// U+0301, as some PDFs and macOS file names have them) and Hangul spelled as conjoining jamo are
// the same words as their precomposed forms, in tools and queries alike.
func nfc(s string) string {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] < utf8.RuneSelf
	}
	if ascii || unorm.NFC.IsNormalString(s) {
		return s
	}
	return unorm.NFC.String(s)
}

type runeKind uint8

const (
	kindOther runeKind = iota
	kindLetter
	kindDigit
	kindWord // letters and digits
	kindCJK
	kindMark
	kindJunk   // the rest of an over-long run, ignored
	kindIgnore // an invisible format character, as if absent (see classify)
)

func classify(r rune) runeKind {
	switch {
	case r < 0x80:
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return kindLetter
		case r >= '0' && r <= '9':
			return kindDigit
		}
		return kindOther
	case isCJK(r):
		return kindCJK
	case unicode.IsLetter(r):
		return kindLetter
	case unicode.IsDigit(r):
		return kindDigit
	case unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me):
		// Combining marks, spacing ones too: the vowel signs of Indic scripts (खोजें).
		return kindMark
	case r != zeroWidthSpace && unicode.Is(unicode.Cf, r):
		// Format characters are invisible and, between letters, no word break (UAX #29):
		// a soft hyphen (text copied from web pages and PDFs), zero-width (non-)joiners, a
		// word joiner, a byte order mark, bidi marks. A zero-width space is a word break.
		return kindIgnore
	}
	return kindOther
}

// zeroWidthSpace separates words without showing, as Thai and Khmer text uses it.
const zeroWidthSpace = '\u200B'

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r) ||
		r == 'ー' // prolonged sound mark, inside Katakana words
}

func emitCJK(run []rune, emit func(string, termKind)) {
	for i := range run {
		emit(string(run[i]), termWord)
		if i+1 < len(run) {
			emit(string(run[i:i+2]), termWord)
		}
	}
}

// emitWord splits one alphanumeric run at camelCase and letter/digit
// boundaries and emits the parts, then the short identifiers inside it whose
// parts alone are dropped (see emitCompounds), then the joined form when it
// was split. A run too long to be one term is an identifier
// (getRepositoryContributorStatisticsForOrganization) when its parts are
// words, whose parts are emitted without the joined form, or a blob (a hash,
// base64) when they are mostly a character or two, and then emits nothing.
func emitWord(run []rune, emit func(string, termKind)) {
	var stack [4*maxTokenBytes/3 + 2]int // a run that is no blob has at most this many parts
	bounds := append(stack[:0], 0)       // where each part starts, then len(run)
	for i := 1; i < len(run); i++ {
		if isBoundary(run, i) {
			bounds = append(bounds, i)
		}
	}
	bounds = append(bounds, len(run))
	parts := len(bounds) - 1
	long := len(run) > maxTokenBytes
	if long && 3*parts > len(run) {
		return // a blob
	}
	words := true // every part is a word of its own
	for p := range parts {
		words = emitPart(acronymSingular(run[bounds[p]:bounds[p+1]]), emit) && words
	}
	if parts > 1 {
		emitCompounds(run, bounds, emit)
	}
	if parts > 1 && !long {
		// The joined form also keeps short identifiers whose parts alone
		// are dropped: S3, mp3, 24h.
		kind := termJoined
		if words {
			kind = termAlias
		}
		emitPart(run, func(tok string, _ termKind) { emit(tok, kind) })
	}
}

// emitCompounds emits, as joined terms, the short identifiers inside a run split into parts
// (bounds: where each part starts, then len(run)) whose parts alone are dropped for being one
// character: a number with a letter before it when either is one character, and with a single
// letter after it (listS3Buckets → s3, getEC2Instances → ec2, getX509Cert → x509, listK8sPods →
// k8s), as a query writes them alone. A number between longer words (base64Encode) is no such
// identifier, and a run that is nothing else has its joined form already.
func emitCompounds(run []rune, bounds []int, emit func(string, termKind)) {
	parts := len(bounds) - 1
	for p := range parts {
		a, b := bounds[p], bounds[p+1]
		if !unicode.IsDigit(run[a]) {
			continue
		}
		from, to := p, p+1
		if p > 0 && (b-a == 1 || a-bounds[p-1] == 1) {
			from = p - 1 // the letters before: parts next to a number are not digits
		}
		if from < p && p+2 <= parts && bounds[p+2]-b == 1 {
			to = p + 2 // a single letter after (the s of k8s)
		}
		if to-from > 1 && to-from < parts {
			emitPart(run[bounds[from]:bounds[to]], func(tok string, _ termKind) { emit(tok, termJoined) })
		}
	}
}

// acronymSingular drops the plural s of an upper-case acronym (APIs → API),
// which the stemmer cannot see once lower-cased ("apis" ends like "axis").
func acronymSingular(part []rune) []rune {
	n := len(part)
	if n < 3 || part[n-1] != 's' {
		return part
	}
	for _, r := range part[:n-1] {
		if !unicode.IsUpper(r) {
			return part
		}
	}
	return part[:n-1]
}

func isBoundary(run []rune, i int) bool {
	prev, cur := run[i-1], run[i]
	pd, cd := unicode.IsDigit(prev), unicode.IsDigit(cur)
	if pd != cd {
		return true
	}
	if pd {
		return false
	}
	cu := unicode.IsUpper(cur)
	if cu && unicode.IsLower(prev) {
		return true // getLogs
	}
	// HTTPServer: split before the last capital of an upper-case run, but
	// not before a plural s (APIs, CNNs).
	if cu && unicode.IsUpper(prev) && i+1 < len(run) && unicode.IsLower(run[i+1]) {
		return !(i+2 == len(run) && run[i+1] == 's')
	}
	return false
}

// emitPart lower-cases, filters and stems one part; it reports whether a
// term was emitted.
func emitPart(part []rune, emit func(string, termKind)) bool {
	if len(part) == 0 || len(part) > maxTokenBytes {
		return false
	}
	// ASCII, the common case: lower-case and stem in a stack buffer.
	var tmp [maxTokenBytes + 1]byte
	ascii := true
	for i, r := range part {
		if r >= 0x80 {
			if r = foldRune(r); r >= 0x80 {
				ascii = false
				break
			}
		}
		c := byte(r)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		tmp[i] = c
	}
	if ascii {
		w := tmp[:len(part)]
		if len(w) == 1 || isStopWord(w) {
			return false // stray letters and digits ("Apple's" → s), stop words
		}
		// A stem can land on a stop word ("one" → "on", "using" → "us").
		if w = stemBytes(w); len(w) < 2 || isStopWord(w) {
			return false
		}
		emit(string(w), termWord)
		return true
	}
	var b strings.Builder
	b.Grow(len(part))
	for _, r := range part {
		b.WriteRune(foldRune(r))
	}
	w := b.String()
	if len(w) > maxTokenBytes || stopWords[w] {
		return false
	}
	emit(w, termWord)
	return true
}

// foldRune returns the lower case of r's upper case: its lower case, except that the variants
// of a letter that only differ in case are one (the Greek final sigma ς is σ, as Σ lower-cases;
// the long s ſ is s). A word that folds to ASCII (FİLES: files) is then read as an ASCII word.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return unicode.ToLower(r)
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// isStopWord reports whether w is one of stopWords, without a lookup for a word longer than
// any of them (most of a query's).
func isStopWord(w []byte) bool { return len(w) <= maxStopWord && stopWords[string(w)] }

// maxStopWord is the length of the longest of stopWords.
var maxStopWord = func() (n int) {
	for w := range stopWords {
		n = max(n, len(w))
	}
	return n
}()

// stopWords is a small English stop list: function words and the politeness
// of natural-language requests, which carry no tool-selecting information.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the and or nor of to in on for with by at from as into onto than then
		is are was were be been being am do does did doing done have has had having
		it its this that these those there here what which who whom whose when where why how
		i me my mine we us our ours you your yours he him his she her hers they them their theirs
		can could would should will shall may might must
		if so not no but about over under also just very too only own same other such
		all any each some both few more most much many
		within without via per upon among around across along through during before after
		above below between against toward towards onto off out up down again further once
		etc yet still even ever every either neither whether while until unless
		please want need tell let thank thanks kindly`) {
		m[w] = true
	}
	return m
}()
