package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// checkDecodings: each decoding of s that findSpansView searches has an idx (index) of one
// offset a decoded byte plus the end, non-decreasing, its view the one decoded with idx.
func checkDecodings(t *testing.T, s string) {
	t.Helper()
	view, idx := unescape(s, true)
	for k, d := range decodings(s, view, idx) {
		di := d.index()
		if len(di) != len(d.view)+1 {
			t.Fatalf("decodings(%q)[%d] (kinds %d): %d bytes decoded, idx of %d", s, k, d.kinds, len(d.view), len(di))
		}
		if di[len(d.view)] != len(s) {
			t.Fatalf("decodings(%q)[%d]: idx ends at %d, not %d", s, k, di[len(d.view)], len(s))
		}
		for i := 1; i < len(di); i++ {
			if di[i] < di[i-1] {
				t.Fatalf("decodings(%q)[%d]: idx decreases at %d", s, k, i)
			}
		}
		var again []byte
		if d.kinds == 0 {
			again, _ = percentThenJSON(nil, s, true)
		} else {
			again, _ = unescapeInto(nil, s, true, d.kinds)
		}
		if !bytes.Equal(again, d.view) {
			t.Fatalf("decodings(%q)[%d]: view %q, with idx %q", s, k, d.view, again)
		}
	}
}

// FuzzCut: StringCut, PartialEnd and JSON never fail on text of any shape (escapes cut short,
// %5C and \\u mixed, a lone '%', invalid UTF-8), each decoding has an idx that fits its view,
// PartialEnd cuts inside the text, and StringCut leaves no whole value.
func FuzzCut(f *testing.F) {
	for _, s := range []string{"", "%", "hunter22%", `%5Cu0068unter22`, `%5C\\u0068unter22…`, `\\/%5C%2F`,
		"x\xff%5Cu00hun…ter22", `%5C%5Cu0068%`, `h%5Cu0075nter2…`, `\u0068unt%65r22\`, `%255Cu0068`} {
		f.Add(s, uint16(len(s)))
	}
	v := New("hunter22", "5ecr3t-t0ken")
	f.Fuzz(func(t *testing.T, s string, cut uint16) {
		checkDecodings(t, s)
		c := min(int(cut), len(s))
		msg := s[:c] + "…" + s[c:]
		out := v.StringCut(msg, "…")
		for _, secret := range []string{"hunter22", "5ecr3t-t0ken"} {
			if strings.Contains(out, secret) {
				t.Errorf("StringCut(%q) = %q holds %q", msg, out, secret)
			}
		}
		if pe := v.PartialEnd(s); pe < 0 || pe > len(s) {
			t.Fatalf("PartialEnd(%q) = %d", s, pe)
		}
		doc, _ := json.Marshal(map[string]string{s[:c]: s[c:]})
		if got, _ := v.JSON(doc); !json.Valid(got) {
			t.Errorf("JSON(%s) = %s: not JSON", doc, got)
		}
	})
}
