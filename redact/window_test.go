package redact

import (
	"strings"
	"testing"
)

// TestInWindowPercentEscapedJSON: In decodes long text a window at a time, windows overlapping
// by as much as a form can take spelled with escapes; it took 6 bytes a byte (\u00XX), and JSON
// text percent-escaped takes up to 18 ("%5C%75%30%30%36%31" is "a"): a value so spelled across
// the end of a window was in neither, In said none, and JSON left the document as it was.
func TestInWindowPercentEscapedJSON(t *testing.T) {
	v := New("abcde")
	for _, sp := range []string{
		"%5Cu0061%5Cu0062%5Cu0063%5Cu0064%5Cu0065",
		"%5C%75%30%30%36%31%5C%75%30%30%36%32%5C%75%30%30%36%33%5C%75%30%30%36%34%5C%75%30%30%36%35",
	} {
		for at := 16<<10 - len(sp); at <= 16<<10; at += 4 {
			doc := `{"q":"` + strings.Repeat("x", at-len(`{"q":"`)) + sp + strings.Repeat("y", 20<<10) + `"}`
			if !v.In([]byte(doc)) {
				t.Errorf("In: the value spelled %q at %d not seen", sp, at)
			}
			if out, _ := v.JSON([]byte(doc)); strings.Contains(string(out), sp) {
				t.Errorf("JSON: the value spelled %q at %d left", sp, at)
			}
		}
	}
}
