package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// propSecret returns a random secret of one of the kinds the redactor treats apart (plain, with
// characters JSON escapes, multi-byte, hex, digits), near the lengths where forms start.
func propSecret(rng *rand.Rand) string {
	pick := func(alpha []rune, n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alpha[rng.IntN(len(alpha))])
		}
		return b.String()
	}
	lens := []int{MinLen, MinLen + 1, MinBase64Len - 1, MinBase64Len, MinBase64Len + 1, MinCaseLen - 1, MinCaseLen, MinCaseLen + 1, 12, 20, 33}
	n := lens[rng.IntN(len(lens))]
	alnum := []rune("ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyz0123456789")
	switch rng.IntN(6) {
	case 0:
		return pick(alnum, n)
	case 1:
		return pick([]rune(`Qz9"\/<>& %+=-_.x`+"\t\n\x01"), n)
	case 2:
		return pick([]rune("Qzäß中€😀x9"), n)
	case 3:
		return pick([]rune("0123456789abcdefABCDEF"), max(n, 2)) + "f"
	case 4:
		s := pick([]rune("0123456789"), n)
		return strings.TrimLeft(s[:1], "0") + "7" + s[1:]
	default:
		return pick([]rune("ab"), n) + pick(alnum, 2)
	}
}

// propSecrets returns 1-4 secrets, some related: one a prefix of another, one inside another,
// two that overlap.
func propSecrets(rng *rand.Rand) []string {
	out := []string{propSecret(rng)}
	for range rng.IntN(4) {
		base := out[rng.IntN(len(out))]
		switch rng.IntN(4) {
		case 0:
			out = append(out, propSecret(rng))
		case 1: // a prefix of another (on a character boundary)
			k := max(MinLen, len(base)/2)
			for k < len(base) && !utf8.RuneStart(base[k]) {
				k++
			}
			out = append(out, base[:k])
		case 2: // holds another
			out = append(out, "Zx"+base+"Yw")
		default: // its end starts another
			k := len(base) / 2
			for k < len(base) && !utf8.RuneStart(base[k]) {
				k++
			}
			out = append(out, base[k:]+"Kq7w")
		}
	}
	// (a value Placeholder holds is left in every replacement: not one to configure)
	return slices.DeleteFunc(out, func(s string) bool { return New(s).inPlaceholder })
}

// isDigits reports whether s is made of digits (a value JSON may spell as a number).
func isDigits(s string) bool { return strings.Trim(s, "0123456789") == "" && s != "" }

// spellDecoded returns s spelled as a tool may (text level, before any JSON string escaping): as
// is, percent-escaped (some bytes, either case; '+' for a space), in base64 inside a longer
// base64 text, in the other letter case (a hex value).
func spellDecoded(rng *rand.Rand, s string) string {
	switch k := rng.IntN(7); {
	case k == 1:
		var b strings.Builder
		plus := rng.IntN(2) == 0
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == ' ' && plus:
				b.WriteByte('+')
			case rng.IntN(3) == 0 || c == '%' || c == '+' || c == ' ':
				h := fmt.Sprintf("%%%02X", c)
				if rng.IntN(2) == 0 {
					h = strings.ToLower(h)
				}
				b.WriteString(h)
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	case k == 2 && len(s) >= MinBase64Len:
		enc := []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding}[rng.IntN(4)]
		pre := strings.Repeat("\x07", rng.IntN(3)) + strings.Repeat("k", rng.IntN(2)*3)
		post := strings.Repeat("\xfe", rng.IntN(4))
		return "b64:" + enc.EncodeToString([]byte(pre+s+post))
	case k == 4: // JSON text percent-escaped (a query parameter holding JSON)
		var b strings.Builder
		for _, c := range []byte(jsonContent(rng, s)) {
			if c == '\\' || c == '%' || c == '"' || c >= 0x80 || rng.IntN(4) == 0 {
				fmt.Fprintf(&b, "%%%02x", c)
			} else {
				b.WriteByte(c)
			}
		}
		return b.String()
	case k == 3 && len(s) >= MinCaseLen && hexValue(s):
		if rng.IntN(2) == 0 {
			return strings.ToUpper(s)
		}
		return strings.ToLower(s)
	}
	return s
}

// jsonContent returns s as JSON string content (without quotes), escaped as some encoder may:
// encoding/json, or with \u escapes (either case) of some characters, surrogate pairs, \/.
func jsonContent(rng *rand.Rand, s string) string {
	if !utf8.ValidString(s) || rng.IntN(3) == 0 {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	var b strings.Builder
	for _, c := range s {
		esc := rng.IntN(3) == 0
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			esc = true
		case c == '/' && esc:
			b.WriteString(`\/`)
			continue
		}
		if !esc {
			b.WriteRune(c)
			continue
		}
		f := `\u%04x`
		if rng.IntN(2) == 0 {
			f = `\u%04X`
		}
		if c > 0xFFFF {
			c -= 0x10000
			fmt.Fprintf(&b, f+f, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		} else {
			fmt.Fprintf(&b, f, c)
		}
	}
	return b.String()
}

var propFiller = []string{"the ", "tool ", "said: ", "ok", ", ", "id=", "value ", "a", "b", "x", "-", "9", "Q", "z", "[", "]", "ab",
	// escapes of escapes, and what looks like one: percent-escaped backslashes before a JSON
	// escape, JSON-escaped backslashes, a lone '%', invalid UTF-8
	"%5C", "%5c%5C", `\\u`, `\\/`, `\`, "%", "%2", "\xff", "\xc3"}

// propText returns text (decoded level) with secrets spelled in it, adjacent and repeated.
func propText(rng *rand.Rand, secrets []string) string {
	var b strings.Builder
	for range 1 + rng.IntN(6) {
		if rng.IntN(2) == 0 {
			b.WriteString(propFiller[rng.IntN(len(propFiller))])
		}
		s := secrets[rng.IntN(len(secrets))]
		sp := spellDecoded(rng, s)
		for range 1 + rng.IntN(2)*rng.IntN(3) {
			b.WriteString(sp)
		}
		if rng.IntN(4) == 0 { // overlapping occurrences: "abab" in "ababab"
			b.WriteString(s[len(s)/2:])
		}
	}
	return b.String()
}

// propDoc returns a random JSON document (as text) with secrets spelled in its strings, keys
// and (digit secrets) numbers.
func propDoc(rng *rand.Rand, secrets []string, depth int) string {
	str := func() string { return `"` + jsonContent(rng, propText(rng, secrets)) + `"` }
	switch k := rng.IntN(5); {
	case depth > 2 || k == 0:
		return str()
	case k == 1:
		s := secrets[rng.IntN(len(secrets))]
		if isDigits(s) && s[0] != '0' {
			switch rng.IntN(3) {
			case 0:
				return s
			case 1: // exponent form: d.ddd e+N
				return s[:1] + "." + s[1:] + fmt.Sprintf("e%d", len(s)-1)
			default:
				return s + "0E-1"
			}
		}
		return fmt.Sprint(rng.IntN(1000))
	case k == 2:
		var parts []string
		for range rng.IntN(4) {
			parts = append(parts, propDoc(rng, secrets, depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		var parts []string
		for i := range rng.IntN(4) {
			key := `"k` + fmt.Sprint(i) + `"`
			if rng.IntN(2) == 0 {
				key = str()
			}
			parts = append(parts, key+":"+propDoc(rng, secrets, depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

// leak returns how text (decoded level) still spells secret, or "".
func leak(text, secret string) string {
	if strings.Contains(text, secret) {
		return "as is"
	}
	if len(secret) >= MinCaseLen && hexValue(secret) && strings.Contains(strings.ToLower(text), strings.ToLower(secret)) {
		return "other case"
	}
	if d, _ := unescape(text, false); d != nil && strings.Contains(string(d), secret) {
		return "escaped"
	}
	if d, _ := percentThenJSON(nil, text, false); d != nil && strings.Contains(string(d), secret) {
		return "percent-escaped JSON"
	}
	if strings.Contains(secret, " ") && strings.Contains(text, strings.ReplaceAll(secret, " ", "+")) {
		return "plus"
	}
	if len(secret) >= MinBase64Len {
		isB64 := func(c byte) bool {
			return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("+/-_", c) >= 0
		}
		for i := 0; i < len(text); {
			if !isB64(text[i]) {
				i++
				continue
			}
			j := i
			for j < len(text) && isB64(text[j]) {
				j++
			}
			run := strings.NewReplacer("-", "+", "_", "/").Replace(text[i:j])
			for off := 0; off < 4 && off < len(run); off++ {
				r := run[off:]
				r = r[:len(r)/4*4]
				if d, err := base64.StdEncoding.DecodeString(r); err == nil && strings.Contains(string(d), secret) {
					return "base64"
				}
				// the partial characters around the value
				r2 := run[off:]
				for len(r2)%4 != 0 {
					r2 += "A"
				}
				if d, err := base64.StdEncoding.DecodeString(r2); err == nil && strings.Contains(string(d), secret) {
					return "base64"
				}
			}
			i = j
		}
	}
	return ""
}

// numberLeak reports whether the JSON number n, spelled out exactly, holds the digit secret.
func numberLeak(n, secret string) bool {
	if !isDigits(secret) {
		return false
	}
	r, ok := new(big.Rat).SetString(n)
	if !ok {
		return false
	}
	return strings.Contains(r.FloatString(40), secret)
}

// docLeak walks a decoded document and returns where a secret survives.
func docLeak(doc any, secrets []string) string {
	switch x := doc.(type) {
	case map[string]any:
		for k, v := range x {
			for _, s := range secrets {
				if l := leak(k, s); l != "" {
					return fmt.Sprintf("key %q holds %q (%s)", k, s, l)
				}
			}
			if l := docLeak(v, secrets); l != "" {
				return l
			}
		}
	case []any:
		for _, v := range x {
			if l := docLeak(v, secrets); l != "" {
				return l
			}
		}
	case string:
		for _, s := range secrets {
			if l := leak(x, s); l != "" {
				return fmt.Sprintf("string %q holds %q (%s)", x, s, l)
			}
		}
	case json.Number:
		for _, s := range secrets {
			if numberLeak(string(x), s) {
				return fmt.Sprintf("number %s holds %q", x, s)
			}
		}
	}
	return ""
}

// TestPropertyRandomSecrets: random secrets (related to one another: prefixes, one inside
// another, overlapping), spelled in every way doc.go lists, in random text and in random JSON
// documents (strings, keys, numbers): String leaves no spelling of any, JSON and Walk keep the
// document valid JSON and leave none in its decoded strings, keys and numbers.
func TestPropertyRandomSecrets(t *testing.T) {
	seeds := 2000
	if n, err := strconv.Atoi(os.Getenv("REDACT_PROP_SEEDS")); err == nil {
		seeds = n
	}
	fails := 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 77))
		secrets := propSecrets(rng)
		if len(secrets) == 0 {
			continue
		}
		v := New(secrets...)
		text := propText(rng, secrets)
		out := v.String(text)
		for _, s := range secrets {
			if l := leak(out, s); l != "" {
				fails++
				if fails < 15 {
					t.Errorf("seed %d: String(%q) = %q: %q left (%s); secrets %q", seed, text, out, s, l, secrets)
				}
			}
		}
		doc := propDoc(rng, secrets, 0)
		if !json.Valid([]byte(doc)) {
			t.Fatalf("seed %d: generated invalid JSON %s", seed, doc)
		}
		res, _ := v.JSON([]byte(doc))
		d, err := Decode(res)
		if err != nil {
			fails++
			t.Errorf("seed %d: JSON(%s) = %s: not JSON: %v", seed, doc, res, err)
			continue
		}
		if l := docLeak(d, secrets); l != "" {
			fails++
			if fails < 15 {
				t.Errorf("seed %d: JSON: %s; secrets %q", seed, l, secrets)
			}
		}
	}
	t.Logf("%d seeds, %d failures", seeds, fails)
}

// TestPropertyStringCut: random text holding secrets in their spellings, cut at a random byte
// (as truncateString cuts, "…" appended) and quoted inside a longer message: StringCut leaves
// no whole spelling, and before the mark no start (MinLen bytes or more) of any form of a
// value, as it is or decoded; PartialEnd cuts text with no mark so that none is left either.
func TestPropertyStringCut(t *testing.T) {
	seeds := 2000
	if n, err := strconv.Atoi(os.Getenv("REDACT_PROP_SEEDS")); err == nil {
		seeds = n
	}
	const mark = "…"
	fails := 0
	report := func(format string, args ...any) {
		if fails++; fails < 15 {
			t.Errorf(format, args...)
		}
	}
	// endsWithStart reports whether text ends with the first k ≥ MinLen bytes (not all) of f.
	endsWithStart := func(text, f string) bool {
		for k := MinLen; k < len(f); k++ {
			if strings.HasSuffix(text, f[:k]) {
				return true
			}
		}
		return false
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 78))
		secrets := propSecrets(rng)
		if len(secrets) == 0 {
			continue
		}
		v := New(secrets...)
		full := propText(rng, secrets)
		if rng.IntN(2) == 0 {
			full = jsonContent(rng, full)
		}
		cut := rng.IntN(len(full) + 1)
		for cut > 0 && cut < len(full) && !utf8.RuneStart(full[cut]) {
			cut--
		}
		msg := "server said: " + full[:cut] + mark + " (call " + propText(rng, secrets) + ")"
		checkDecodings(t, msg) // (an idx that fits each view: cutStart indexes it)
		out := v.StringCut(msg, mark)
		for _, s := range secrets {
			if l := leak(out, s); l != "" {
				report("seed %d: StringCut(%q) = %q: %q left (%s)", seed, msg, out, s, l)
			}
		}
		before, _, _ := strings.Cut(out, mark)
		decs := []string{before}
		for _, d := range propDecodings(before) {
			decs = append(decs, string(d.view))
			if n := cutEscape(string(d.view)); n > 0 {
				decs = append(decs, string(d.view[:len(d.view)-n]))
			}
		}
		for _, s := range secrets {
			for _, f := range forms(s) {
				for _, dec := range decs {
					if endsWithStart(dec, f) {
						report("seed %d: StringCut(%q) = %q: the start of %q (form %q) is left before the mark", seed, msg, out, s, f)
					}
				}
			}
		}
		// PartialEnd: the text cut with no mark. No start of a form that ends where the
		// text does (as it is, or decoded, perhaps with an escape cut short after it) begins
		// before it, and no whole form goes through it.
		text := full[:cut]
		pe := v.PartialEnd(text)
		textDecs := propDecodings(text)
		for _, s := range secrets {
			for _, f := range forms(s) {
				for k := MinLen; k < len(f); k++ {
					if strings.HasSuffix(text, f[:k]) && len(text)-k < pe {
						report("seed %d: PartialEnd(%q) = %d: the start of %q (form %q) is left", seed, text, pe, s, f)
					}
					for _, d := range textDecs {
						view, idx := d.view, d.idx
						for _, n := range []int{0, cutEscape(string(view))} {
							vs := string(view[:len(view)-n])
							if strings.HasSuffix(vs, f[:k]) && idx[len(vs)-k] < pe {
								report("seed %d: PartialEnd(%q) = %d: the start of %q (form %q) is left decoded", seed, text, pe, s, f)
							}
						}
					}
				}
			}
		}
		for _, sp := range findSpans(v.m, text) {
			if sp.i < pe && pe < sp.j {
				report("seed %d: PartialEnd(%q) = %d: cuts the value at %d:%d", seed, text, pe, sp.i, sp.j)
			}
		}
		red := v.String(text[:pe])
		for _, s := range secrets {
			if l := leak(red, s); l != "" {
				report("seed %d: String(%q) = %q: %q left (%s)", seed, text[:pe], red, s, l)
			}
		}
	}
	t.Logf("%d seeds, %d failures", seeds, fails)
}

// propDecoded is text decoded, with idx as unescape's.
type propDecoded struct {
	view []byte
	idx  []int
}

// propDecodings returns text decoded in each way String searches it (both kinds of escape at
// once, each kind alone, percent then JSON), with idx; the ones that decode nothing left out.
func propDecodings(text string) []propDecoded {
	var out []propDecoded
	add := func(v []byte, i []int) {
		if v != nil {
			out = append(out, propDecoded{v, i})
		}
	}
	add(unescape(text, true))
	add(unescapeInto(nil, text, true, percentEscapes))
	add(unescapeInto(nil, text, true, jsonEscapes))
	add(percentThenJSON(nil, text, true))
	return out
}
