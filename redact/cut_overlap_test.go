package redact

import (
	"strings"
	"testing"
)

// TestPartialEndOverlaps: the start of a value at the end of cut text may be inside a whole
// form of another (a value whose end starts the other): cut there, the start of the whole one
// was left, no longer whole. And when an escape cut short starts the escaped form of one value
// ("\u0": "\u003c…") while the text decoded before it starts another, the earlier start goes:
// the first one found was taken, and the other value's start was left.
func TestPartialEndOverlaps(t *testing.T) {
	for _, tc := range []struct {
		secrets []string
		text    string
		want    int
	}{
		{[]string{"abbabbbaT3", "bbaT3Kq7w"}, "said: %61bbab%62baT3", len("said: ")},
		{[]string{"abbabbbaT3", "bbaT3Kq7w"}, "said: abbabbbaT3", len("said: ")},
		{[]string{"D9E19fdcCf1Db3B408Fef", "<_+_Q_-"}, `i\u0064=D\u0039E19fdcCf\u0031Db3B4\u0`, len(`i\u0064=`)},
		{[]string{"\x01.\x01"}, `tool \u0001.\u0001\u0001\u00`, len(`tool \u0001.\u0001`)},
	} {
		v := New(tc.secrets...)
		if got := v.PartialEnd(tc.text); got != tc.want {
			t.Errorf("New(%q).PartialEnd(%q) = %d (kept %q), want %d", tc.secrets, tc.text, got, tc.text[:got], tc.want)
		}
	}
	v := New("D9E19fdcCf1Db3B408Fef", "<_+_Q_-")
	in := `id: D\u0039E19fdcCf\u0031Db3B4\u0… (cut)`
	if got := v.StringCut(in, "…"); strings.Contains(got, "Db3B4") {
		t.Errorf("StringCut(%q) = %q: the start of the value is left", in, got)
	}
}
