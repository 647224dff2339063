package redact

import (
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

// Forms of a value. A value is found in text as it is and in the forms below; a form is derived
// only from a value long enough for it not to match ordinary text by chance.
//
// Per value there are at most 16 forms (maxForms): itself, its two encoding/json spellings, its
// lower- and upper-case spellings (a hex value), itself with '+' for a space (a query string) (a value
// with a space), and ten base64 forms. None is longer than 6 times the value (a \u00XX escape
// per byte): the matcher holds at most about 32 bytes of forms per byte of value, plus a fixed
// 8 KiB table — no automaton whose size multiplies with the number of values.
//
// Percent escapes and JSON escapes of single characters are not forms (a value of n escapable
// bytes has 2^n such spellings): text that holds some (see unescape) is searched a second time
// decoded, each decoded byte mapped back to the escape it came from.
const (
	// MinBase64Len is the shortest value whose base64 forms are redacted: a 6-byte value's
	// base64 inside a longer base64 text is 7 characters (42 bits), unlikely to turn up by
	// chance even in megabytes of base64 (an image); a 3-byte value's would be 3 characters.
	MinBase64Len = 6
	// MinCaseLen is the shortest hex value (digits, a-f, and '-' as in a UUID) that is also
	// redacted in the other letter case: hex is case-insensitive, so tools print it either way
	// ("DEADBEEF"); a shorter one is too much like a word ("cafe", "Face").
	MinCaseLen = 8

	maxForms = 16
)

// forms returns v and the other forms it is redacted in (see above).
func forms(v string) []string {
	out := []string{v}
	for _, f := range escapedForms(v) {
		out = append(out, string(f))
	}
	if len(v) >= MinCaseLen && hexValue(v) {
		out = append(out, strings.ToLower(v), strings.ToUpper(v))
	}
	if strings.Contains(v, " ") {
		// A space as '+' (a query string, a form body: url.QueryEscape); "%20" and every
		// other percent escape are found by decoding the text (see unescape).
		out = append(out, strings.ReplaceAll(v, " ", "+"))
	}
	if len(v) >= MinBase64Len {
		out = append(out, base64Forms(v)...)
	}
	seen := map[string]bool{}
	uniq := out[:0]
	for _, f := range out {
		if len(f) >= MinLen && !seen[f] {
			seen[f] = true
			uniq = append(uniq, f)
		}
	}
	return uniq
}

// base64Forms returns v's base64 encodings, standard and URL alphabets, padded and not, and,
// for each alphabet and each of the three alignments v may have inside a longer base64 text
// (its first byte at an offset ≡ 0, 1 or 2 mod 3 of what was encoded), the characters that
// encode bits of v only: the ones that also encode a byte before or after v vary with the text,
// and are left (at most 1 character, 4 bits of v, at each end).
func base64Forms(v string) []string {
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)))
		raw := enc.WithPadding(base64.NoPadding)
		for k := range 3 {
			buf := make([]byte, k, k+len(v))
			e := raw.EncodeToString(append(buf, v...))
			// Character i encodes bits [6i, 6i+6) of the text; v's are [8k, 8(k+len(v))).
			lo, hi := (8*k+5)/6, 8*(k+len(v))/6
			out = append(out, e[lo:hi])
			if k == 0 {
				out = append(out, e) // the unpadded encoding of v alone
			}
		}
	}
	return out
}

// hexValue reports whether v is made of hex digits (and '-': a UUID) with at least one letter.
func hexValue(v string) bool {
	letter := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case '0' <= c && c <= '9', c == '-':
		case 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			letter = true
		default:
			return false
		}
	}
	return letter
}

// numericValue reports whether v is a number as JSON writes one without exponent: digits with
// perhaps a sign and a fraction.
func numericValue(v string) bool {
	v = strings.TrimPrefix(v, "-")
	i, f, _ := strings.Cut(v, ".")
	return i != "" && strings.Trim(i, "0123456789") == "" && strings.Trim(f, "0123456789") == "" &&
		(f != "" || !strings.Contains(v, "."))
}

// matcher finds any of a set of forms in text in one pass (Wu–Manber): it looks at the 3 bytes
// that end a window as long as the shortest form, and moves the window on by as many bytes as
// those 3 allow (up to that length less 2: a form of 20 bytes or more lets it look at about one
// position in 18 of text that holds none); where a form may end the window, it compares the
// forms that begin with the window's first 3 bytes.
type matcher struct {
	n     int                 // the length of the shortest form
	max   int                 // the length of the longest form
	bits  uint                // log2 len(shift)
	shift []uint8             // by hash of 3 bytes: how far the window may move when they end it
	cands map[uint32][]string // forms by their first 3 bytes, longest first
	bytes [256]bool           // the bytes the forms hold
	marks atomic.Pointer[markHeld]
}

func key3(a, b, c byte) uint32 { return uint32(a)<<16 | uint32(b)<<8 | uint32(c) }

func newMatcher(forms []string) *matcher {
	m := &matcher{cands: map[uint32][]string{}, n: 1 << 30}
	seen := map[string]bool{}
	blocks := 0
	for _, f := range forms {
		if len(f) < 3 || seen[f] {
			continue // every value is at least MinLen (3) bytes; so is every form
		}
		seen[f] = true
		for i := 0; i < len(f); i++ {
			m.bytes[f[i]] = true
		}
		m.n, m.max = min(m.n, len(f)), max(m.max, len(f))
		k := key3(f[0], f[1], f[2])
		m.cands[k] = append(m.cands[k], f)
	}
	for _, c := range m.cands {
		blocks += len(c)
		// Longest first: the match reported at a position is the longest there.
		for i := 1; i < len(c); i++ {
			for j := i; j > 0 && len(c[j]) > len(c[j-1]); j-- {
				c[j], c[j-1] = c[j-1], c[j]
			}
		}
	}
	// About 16 table entries per 3-byte block of the forms' first n bytes, 1 KiB to 64 KiB.
	blocks *= m.n - 2
	m.bits = 10
	for m.bits < 16 && 1<<m.bits < 16*blocks {
		m.bits++
	}
	m.shift = make([]uint8, 1<<m.bits)
	def := uint8(min(m.n-2, 255))
	for i := range m.shift {
		m.shift[i] = def
	}
	for f := range seen {
		for q := 0; q+3 <= m.n; q++ {
			h := m.hash(key3(f[q], f[q+1], f[q+2]))
			m.shift[h] = min(m.shift[h], uint8(min(m.n-3-q, 255)))
		}
	}
	return m
}

func (m *matcher) hash(k uint32) uint32 { return (k * 0x9E3779B1) >> (32 - m.bits) }

// find returns the first position p ≥ from of s where a form starts, and the end of the longest
// form there; p < 0 when there is none.
func (m *matcher) find(s string, from int) (p, end int) {
	for i := from + m.n - 1; i < len(s); {
		if sh := m.shift[m.hash(key3(s[i-2], s[i-1], s[i]))]; sh > 0 {
			i += int(sh)
			continue
		}
		p := i - m.n + 1
		for _, f := range m.cands[key3(s[p], s[p+1], s[p+2])] {
			if len(s)-p >= len(f) && s[p:p+len(f)] == f {
				return p, p + len(f)
			}
		}
		i++
	}
	return -1, -1
}

// partialBefore returns the start of the longest text of at least 3 bytes that ends at p in s,
// at or after floor, and is the start of a form (shorter than the form: a form whole is
// find's), or -1 when there is none. It looks at most m.max-1 bytes back, a map lookup each.
func (m *matcher) partialBefore(s string, p, floor int) int {
	for k := min(m.max-1, p-floor); k >= 3; k-- {
		q := p - k
		for _, f := range m.cands[key3(s[q], s[q+1], s[q+2])] {
			if len(f) > k && f[:k] == s[q:p] {
				return q
			}
		}
	}
	return -1
}

// cutStart returns where the text that ends s[:p] (at or after floor) starts when it is the
// start of a form of a value, as it is or decoded (decs: decodings's of s, none when s holds no
// escape), perhaps followed by an escape cut short ("tok%2", "hunt\u00"); -1 when none is.
// When more than one is (the escape cut short "\u0" starts the escaped form of one value, and
// the text decoded before it starts another; a start seen in one decoding only), the earliest:
// none is left.
func (m *matcher) cutStart(s string, p, floor int, decs []decoding) int {
	start := -1
	earliest := func(q int) {
		if q >= 0 && (start < 0 || q < start) {
			start = q
		}
	}
	earliest(m.partialBefore(s, p, floor))
	if n := cutEscape(s[floor:p]); n > 0 {
		earliest(m.partialBefore(s, p-n, floor))
	}
	for k := range decs {
		dec := &decs[k]
		vs := bytesString(dec.view)
		// The decoded byte of s[p] (the mark's, or the end), and of the floor's.
		d, df := len(vs), 0
		if p < len(s) || floor > 0 {
			idx := dec.index()
			d, df = sort.SearchInts(idx, p), sort.SearchInts(idx, floor)
		}
		if q := m.partialBefore(vs, d, df); q >= 0 {
			earliest(dec.index()[q])
		}
		// (an escape cut short is not decoded: its bytes are in the view as they are in s)
		if n := cutEscape(vs[df:d]); n > 0 {
			if q := m.partialBefore(vs, d-n, df); q >= 0 {
				earliest(dec.index()[q])
			}
		}
	}
	return start
}

// cutEscape returns the length of the escape cut short that ends s ("%", "%2", "\\", "\\u",
// "\\u00"...), or 0.
func cutEscape(s string) int {
	n := len(s)
	switch {
	case n >= 1 && (s[n-1] == '%' || s[n-1] == '\\'):
		return 1
	case n >= 2 && s[n-2] == '%' && isHex(s[n-1]):
		return 2
	}
	for k := 0; k <= 3 && k+2 <= n; k++ {
		if s[n-k-2] == '\\' && s[n-k-1] == 'u' {
			return k + 2
		}
		if !isHex(s[n-k-1]) {
			break
		}
	}
	return 0
}

func isHex(c byte) bool { _, ok := hexDigit(c); return ok }

// holds reports whether a form holds sub (a cut mark: the answer for the last one asked is
// kept, the forms are not searched again for each text).
func (m *matcher) holds(sub string) bool {
	if !m.bytes[sub[0]] {
		return false
	}
	if last := m.marks.Load(); last != nil && last.mark == sub {
		return last.holds
	}
	found := false
	for _, fs := range m.cands {
		for _, f := range fs {
			found = found || strings.Contains(f, sub)
		}
	}
	m.marks.Store(&markHeld{sub, found})
	return found
}

// markHeld says whether a form holds mark.
type markHeld struct {
	mark  string
	holds bool
}

// containsDecoded reports whether s holds a form once decoded (see unescape), decoding it a
// window at a time into one buffer: its memory is bounded whatever the size of s. Windows
// overlap by as much text as a form can take spelled with escapes (18 bytes a byte: "\u0061"
// percent-escaped, "%5C%75%30%30%36%31", JSON text percent-escaped as percentThenJSON decodes
// it; \u00XX alone is 6). A window that starts inside an escape may decode differently at its
// start: it may report a form that is not there, never miss one that the previous window did
// not see whole.
func (m *matcher) containsDecoded(s string) bool {
	overlap := 18 * m.max
	// A window at least as long as the overlap: each byte is decoded at most twice, however
	// long the longest value (a 64 KiB one made each byte decoded 30 times).
	w := max(16<<10, overlap)
	var buf, buf2 []byte
	for start := 0; start < len(s); start += w {
		end := min(len(s), start+w+overlap)
		for _, kinds := range append([]int{allEscapes}, otherKinds(s[start:end])...) {
			view, _ := unescapeInto(buf, s[start:end], false, kinds)
			// No escape in the window: nothing to find but as it is (contains).
			if p, _ := m.find(bytesString(view), 0); view != nil && p >= 0 {
				return true
			}
			if cap(view) > cap(buf) {
				buf = view
			}
		}
		// JSON text percent-escaped, as findSpansView decodes it.
		if v2, _ := percentThenJSON(buf2, s[start:end], false); v2 != nil {
			if m.contains(v2) {
				return true
			}
			buf2 = v2
		}
		if end == len(s) {
			break
		}
	}
	return false
}

// contains reports whether raw holds a form.
func (m *matcher) contains(raw []byte) bool {
	p, _ := m.find(bytesString(raw), 0)
	return p >= 0
}

// bytesString returns b as a string without copying it; b must not change while it is used.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// findSpans returns the spans of s where a form is, as it is and decoded (see unescape).
func findSpans(m *matcher, s string) []span {
	spans, _ := findSpansView(m, s)
	return spans
}

// findSpansView is findSpans, also returning the decodings of s it searched (decodings: none
// when s holds no escape).
//
// Text that holds both percent escapes and backslashes is also searched decoded one kind of
// escape at a time (otherKinds): decoding both at once spells some text otherwise than it was
// written, in two layers or in one (a value that holds "%40" in JSON text that escapes '/', a
// value with a backslash percent-escaped elsewhere, a value ending with a backslash before "n").
func findSpansView(m *matcher, s string) (spans []span, decs []decoding) {
	view, idx := unescape(s, true)
	decs = decodings(s, view, idx)
	return decodedSpans(m, s, decs), decs
}

// decodedSpans returns the spans of s where a form is, as it is and in decs (decodings's of s).
func decodedSpans(m *matcher, s string, decs []decoding) (spans []span) {
	for from := 0; ; {
		p, end := m.find(s, from)
		if p < 0 {
			break
		}
		spans = addSpan(spans, span{p, end})
		from = p + 1
	}
	for k := range decs {
		// (idx is found only where a form is, seldom)
		if d := &decs[k]; m.contains(d.view) {
			spans = viewSpans(m, d.view, d.index(), spans)
		}
	}
	return spans
}

// viewSpans appends to spans those of s where a form is in view (decoded from s, with idx).
func viewSpans(m *matcher, view []byte, idx []int, spans []span) []span {
	vs := bytesString(view)
	for from := 0; ; {
		p, end := m.find(vs, from)
		if p < 0 {
			break
		}
		// The decoded bytes [p, end) came from s[idx[p]:idx[k]], k the first decoded byte at
		// or after end that starts another escape (or none: the end of s).
		k := end
		for k < len(view) && idx[k] == idx[end-1] {
			k++
		}
		spans = addSpan(spans, span{idx[p], idx[k]})
		from = p + 1
	}
	return spans
}

// percentThenJSON returns s percent-decoded, then JSON-decoded (JSON text percent-escaped, as
// in a query parameter holding JSON: "p%5Cu00e4sswort" is "p\u00e4sswort", is "pässwort"),
// with idx as unescape's, through both; nil when the percent-decoded text holds no \u escape
// nor \/ (decoded both at once, s gives the rest). (JSON escapes under JSON escapes are not
// decoded so: "\\u0068" in JSON text spells a backslash and "u0068".)
func percentThenJSON(dst []byte, s string, withIdx bool) (view []byte, idx []int) {
	if !hasPercentEscape(s, strings.IndexByte(s, '%')) {
		return nil, nil
	}
	pv, pi := unescapeInto(nil, s, withIdx, percentEscapes)
	ps := bytesString(pv)
	if !hasDecodedEscape(ps, strings.IndexByte(ps, '\\')) {
		return nil, nil
	}
	view, idx = unescapeInto(dst, ps, withIdx, jsonEscapes)
	for k, at := range idx {
		idx[k] = pi[at]
	}
	return view, idx
}

// decoding is s decoded one of the ways findSpansView searches it: view, with idx as
// unescape's (found when first needed: index).
type decoding struct {
	s     string
	kinds int // unescapeInto's; 0: percentThenJSON
	view  []byte
	idx   []int
}

// index returns the decoding's idx.
func (d *decoding) index() []int {
	if d.idx == nil {
		if d.kinds == 0 {
			_, d.idx = percentThenJSON(nil, d.s, true)
		} else {
			_, d.idx = unescapeInto(nil, d.s, true, d.kinds)
		}
	}
	return d.idx
}

// decodings returns s decoded in each of the ways findSpansView searches it, view and idx
// (unescape's of s, given) first; none when s holds no escape. A start of a form at a cut may
// be seen in one of them only, as a whole form is found in one only.
func decodings(s string, view []byte, idx []int) []decoding {
	if view == nil {
		return nil // (no percent escape, \u escape nor \/: no other decoding either)
	}
	decs := []decoding{{s, allEscapes, view, idx}}
	if v, _ := percentThenJSON(nil, s, false); v != nil {
		decs = append(decs, decoding{s: s, view: v})
	}
	for _, kinds := range otherKinds(s) {
		if v, _ := unescapeInto(nil, s, false, kinds); v != nil {
			decs = append(decs, decoding{s: s, kinds: kinds, view: v})
		}
	}
	return decs
}

// Kinds of escapes unescape decodes.
const (
	percentEscapes = 1 << iota // %2F
	jsonEscapes                // \u0068, \/, \n...
	allEscapes     = percentEscapes | jsonEscapes
)

// otherKinds returns the kinds of escapes s is also decoded with, one at a time, besides both at
// once (unescape): none unless s holds a percent escape and a backslash.
func otherKinds(s string) []int {
	if strings.IndexByte(s, '\\') < 0 || !hasPercentEscape(s, strings.IndexByte(s, '%')) {
		return nil
	}
	return []int{percentEscapes, jsonEscapes}
}

// addSpan appends sp to spans, or joins it to the last span when they overlap (matches are
// found in order of their start): a text that is a secret over and over (overlapping matches
// at every byte) holds one span, not one a byte.
func addSpan(spans []span, sp span) []span {
	if n := len(spans); n > 0 && sp.i >= spans[n-1].i && sp.i < spans[n-1].j {
		spans[n-1].j = max(spans[n-1].j, sp.j)
		return spans
	}
	return append(spans, sp)
}

// unescape returns s decoded: percent escapes (%2F, %2f) and JSON string escapes (\u0068, a
// surrogate pair, \/, \", \n...) replaced by what they spell; with idx, idx[i] is the offset in
// s of the escape (or byte) that decoded byte i came from, and idx[len(view)] is len(s). It
// returns nil when s holds no percent escape, \u escape nor \/ (the rest encoding/json writes
// itself, and forms hold): then there is nothing to search a second time.
func unescape(s string, withIdx bool) (view []byte, idx []int) {
	return unescapeInto(nil, s, withIdx, allEscapes)
}

// unescapeInto is unescape, decoding into dst's memory when it is large enough, and only the
// kinds of escapes given (percentEscapes, jsonEscapes: the other kind is kept as it is).
func unescapeInto(dst []byte, s string, withIdx bool, kinds int) (view []byte, idx []int) {
	pct, bs := strings.IndexByte(s, '%'), strings.IndexByte(s, '\\')
	if kinds&percentEscapes == 0 {
		pct = -1
	}
	if kinds&jsonEscapes == 0 {
		bs = -1
	}
	if pct < 0 && bs < 0 {
		return nil, nil
	}
	if !hasPercentEscape(s, pct) && !hasDecodedEscape(s, bs) {
		return nil, nil
	}
	if view = dst[:0]; cap(view) < len(s) {
		view = make([]byte, 0, len(s))
	}
	if withIdx {
		idx = make([]int, 0, len(s)+1)
	}
	emit := func(at int, b ...byte) {
		view = append(view, b...)
		if withIdx {
			for range b {
				idx = append(idx, at)
			}
		}
	}
	for i := 0; i < len(s); {
		// Up to the next '%' or '\\' as it is.
		if pct >= 0 && pct < i {
			if pct = strings.IndexByte(s[i:], '%'); pct >= 0 {
				pct += i
			}
		}
		if bs >= 0 && bs < i {
			if bs = strings.IndexByte(s[i:], '\\'); bs >= 0 {
				bs += i
			}
		}
		j := len(s)
		if pct >= 0 {
			j = pct
		}
		if bs >= 0 && bs < j {
			j = bs
		}
		view = append(view, s[i:j]...)
		if withIdx {
			for k := i; k < j; k++ {
				idx = append(idx, k)
			}
		}
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s):
			if b, ok := hexByte(s[i+1], s[i+2]); ok {
				emit(i, b)
				i += 3
				continue
			}
		case c == '\\' && i+1 < len(s):
			switch e := s[i+1]; e {
			case 'u':
				if r, n := jsonRune(s[i:]); n > 0 {
					var buf [utf8.UTFMax]byte
					emit(i, buf[:utf8.EncodeRune(buf[:], r)]...)
					i += n
					continue
				}
			case '"', '\\', '/':
				emit(i, e)
				i += 2
				continue
			case 'b', 'f', 'n', 'r', 't':
				emit(i, controlEscapes[e])
				i += 2
				continue
			}
		}
		emit(i, c)
		i++
	}
	if withIdx {
		idx = append(idx, len(s))
	}
	return view, idx
}

// controlEscapes are the characters JSON's one-letter escapes spell.
var controlEscapes = [256]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hasPercentEscape reports whether s, whose first '%' is at i (or i < 0: none), holds a percent
// escape.
func hasPercentEscape(s string, i int) bool {
	for i >= 0 {
		if i+2 < len(s) {
			if _, ok := hexByte(s[i+1], s[i+2]); ok {
				return true
			}
		}
		j := strings.IndexByte(s[i+1:], '%')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// hasDecodedEscape reports whether s, whose first '\' is at i (or i < 0: none), holds \u or \/.
func hasDecodedEscape(s string, i int) bool {
	for i >= 0 && i+1 < len(s) {
		if s[i+1] == 'u' || s[i+1] == '/' {
			return true
		}
		next := i + 1
		if s[i+1] == '\\' {
			next = i + 2 // "\\u0068" is a backslash and u0068
		}
		if next >= len(s) {
			return false
		}
		j := strings.IndexByte(s[next:], '\\')
		if j < 0 {
			return false
		}
		i = next + j
	}
	return false
}

// jsonRune decodes the \uXXXX escape (a surrogate pair: two) at the start of s: the rune and
// the bytes it took, or n = 0.
func jsonRune(s string) (r rune, n int) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if r >= 0xD800 && r < 0xDC00 {
		if lo, ok := hex4(s[6:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
			return (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000, 12
		}
	}
	if r >= 0xD800 && r <= 0xDFFF {
		return 0, 0 // a lone surrogate spells no character of a value
	}
	return r, 6
}

// Number reports whether the JSON number n spells a value: as written, or, written in exponent
// form (8.675309e6, 86753.09E+2), once spelled out in plain decimal (8675309). A number so
// reported goes whole (JSON and Walk replace it by Placeholder).
func (v Values) Number(n string) bool {
	if v.m == nil {
		return false
	}
	if p, _ := v.m.find(n, 0); p >= 0 {
		return true
	}
	if !v.numeric {
		return false
	}
	plain, ok := plainNumber(n, v.maxLen)
	if !ok {
		return false
	}
	p, _ := v.m.find(plain, 0)
	return p >= 0
}

// plainNumber returns the JSON number n, written with an exponent, in plain decimal, with at
// most pad zeros added between its digits and the decimal point (a value of at most pad bytes
// cannot tell more zeros apart): bounded whatever the exponent. ok is false for a number
// without an exponent (it is written plainly already) or that is not a JSON number.
func plainNumber(n string, pad int) (string, bool) {
	mant, exp, ok := strings.Cut(strings.ToLower(n), "e")
	if !ok {
		return "", false
	}
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	ip, fp, _ := strings.Cut(mant, ".")
	digits := ip + fp
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
	if err != nil {
		// Past an int: the digits far from the point.
		if strings.HasPrefix(exp, "-") {
			e = -(len(digits) + pad + 1)
		} else {
			e = len(digits) + pad + 1
		}
	}
	e = max(min(e, len(digits)+pad+1), -(len(digits) + pad + 1))
	point := len(ip) + e // decimal point after digits[:point]
	for len(digits) > 1 && digits[0] == '0' {
		digits, point = digits[1:], point-1
	}
	var b strings.Builder
	b.WriteString(sign)
	switch {
	case point <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", min(-point, pad)))
		b.WriteString(digits)
	case point >= len(digits):
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", min(point-len(digits), pad)))
	default:
		b.WriteString(digits[:point])
		b.WriteByte('.')
		b.WriteString(digits[point:])
	}
	return b.String(), true
}

// numberIn reports whether raw holds a number in exponent form that spells a value.
func (v Values) numberIn(raw []byte) bool {
	s := bytesString(raw)
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	for i := 1; i+1 < len(s); i++ {
		if s[i]|0x20 != 'e' || !digit(s[i-1]) || !digit(s[i+1]) && s[i+1] != '-' && s[i+1] != '+' {
			continue
		}
		start := i - 1
		for start > 0 && (digit(s[start-1]) || s[start-1] == '.' || s[start-1] == '-') {
			start--
		}
		end := i + 2
		for end < len(s) && digit(s[end]) {
			end++
		}
		if v.Number(s[start:end]) {
			return true
		}
	}
	return false
}
