package executor

import (
	"strings"
	"testing"
)

// A secret made of digits, carried as a JSON number, is redacted from audit payloads whether
// they are within the cap (decoded and walked) or over it (redacted as read).
func TestRedactNumericSecret(t *testing.T) {
	r := newRedactor([]string{"8675309"})
	small := `{"pin":8675309,"n":[86753090]}`
	big := `{"pin":8675309,"n":[86753090],"pad":"` + strings.Repeat("x", 5000) + `"}`
	for _, in := range []string{small, big} {
		out, _ := r.JSON([]byte(in), 4096)
		if strings.Contains(string(out), "8675309") {
			t.Errorf("secret kept: %.200s", out)
		}
	}
}
