package redact

import (
	"strings"
	"testing"
)

// TestStringCutEscaped: String finds a value spelled with escapes encoding/json does not write
// (percent escapes in a URL's query, "\u0065" in JSON another encoder wrote) by decoding the
// text; StringCut only looked for the start of a value as it is and in the forms, so a cut in
// the middle of an escaped spelling left its first bytes: "?key=tok%2Ben%2FSe…" kept "tok+en/Se"
// of the value, and a cut inside an escape ("tok%2…") kept "tok".
func TestStringCutEscaped(t *testing.T) {
	const secret = "tok+en/Secret99"
	v := New(secret, "hunter2Secret")
	for in, want := range map[string]string{
		"GET /v1?key=tok%2Ben%2FSe…; dropped": "GET /v1?key=[redacted]…; dropped",
		"GET /v1?key=tok%2ben%2f…":            "GET /v1?key=[redacted]…",
		"GET /v1?key=tok%2…":                  "GET /v1?key=[redacted]…",
		"GET /v1?key=tok%…":                   "GET /v1?key=[redacted]…",
		`{"pw":"hunt\u0065r2Se…`:              `{"pw":"[redacted]…`,
		`{"pw":"hunt\u006…`:                   `{"pw":"[redacted]…`,
		`{"pw":"hunt\…`:                       `{"pw":"[redacted]…`,
		"50% off…":                            "50% off…",
		"a%2Fb tok%2Ben and hunt…":            "a%2Fb tok%2Ben and [redacted]…",
	} {
		if got := v.StringCut(in, "…"); got != want {
			t.Errorf("StringCut(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]int{
		"body key=tok%2Ben": 9,
		"body key=tok%2":    9,
		`body "hunt\u00`:    6,
		"body 100%":         9,
	} {
		if got := v.PartialEnd(in); got != want {
			t.Errorf("PartialEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestStringCutManyMarksOneValue: a value that holds the mark itself is still found cut
// before a later mark, however many marks it holds (the look back past an earlier mark is
// kept for the values that hold one).
func TestStringCutMarkInValue(t *testing.T) {
	const secret = "abc…def…ghi-0123"
	v := New(secret)
	in := "x abc…def…gh…"
	if got := v.StringCut(in, "…"); strings.Contains(got, "def") || strings.Contains(got, "abc") {
		t.Errorf("StringCut(%q) = %q: the start of a value holding the mark is left", in, got)
	}
}
