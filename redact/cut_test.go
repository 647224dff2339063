package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestStringCut: a text cut before it was redacted ("…" where it was cut) may end, at the cut,
// with the first bytes of a value: String cannot find them, StringCut does (3 bytes or more of
// it, in any form String finds: as is, JSON-escaped, base64).
func TestStringCut(t *testing.T) {
	const secret = "sk-live-ABCDEF0123456789"
	v := New(secret)
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	for in, want := range map[string]string{
		"key " + secret[:12] + "…":                        "key [redacted]…",
		`id "x` + secret[:3] + "…; dropped":               `id "x[redacted]…; dropped`,
		"a " + secret + " b " + secret[:20] + "…":         "a [redacted] b [redacted]…",
		"cursor " + b64[:17] + "…":                        "cursor [redacted]…",
		"two " + secret[:2] + "… kept: too short to tell": "two " + secret[:2] + "… kept: too short to tell",
		"no cut " + secret[:12]:                           "no cut " + secret[:12],
		"whole " + secret + "…":                           "whole [redacted]…",
		"disk…":                                           "disk…",
		"…" + secret[:10]:                                 "…" + secret[:10],
	} {
		if got := v.StringCut(in, "…"); got != want {
			t.Errorf("StringCut(%q) = %q, want %q", in, got, want)
		}
	}
	if got := (Values{}).StringCut("sk-…", "…"); got != "sk-…" {
		t.Errorf("the zero value: %q", got)
	}
	// Many marks: each is looked at, in time that follows the text.
	long := strings.Repeat("x…", 10000) + secret[:9] + "…"
	if got := v.StringCut(long, "…"); strings.Contains(got, secret[:9]) {
		t.Error("the start of the value before the last of many marks is left")
	}
}

// TestPartialEnd: text cut with no mark (a body cut by a read limit or a lost connection) is
// shortened to before the start of a value it ends with.
func TestPartialEnd(t *testing.T) {
	const secret = "sk-live-ABCDEF0123456789"
	v := New(secret)
	for in, want := range map[string]int{
		"body " + secret[:10]: 5,
		"body " + secret:      len("body " + secret), // whole: String's
		"body sk":             7,                     // 2 bytes: too short to tell
		"clean":               5,
	} {
		if got := v.PartialEnd(in); got != want {
			t.Errorf("PartialEnd(%q) = %d, want %d", in, got, want)
		}
	}
	if got := (Values{}).PartialEnd("sk-live"); got != 7 {
		t.Errorf("the zero value: %d", got)
	}
}
