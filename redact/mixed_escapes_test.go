package redact

import (
	"strings"
	"testing"
)

// TestSecretMixedEscapeKinds: text searched decoded is decoded one way (percent and JSON escapes
// at once), which spells some texts otherwise than the tool meant them. A value that holds a
// percent escape itself (a DSN's password "p%40ss") in JSON text that escapes '/' (PHP's
// json_encode, a tool result quoting JSON in a string), a value that holds a backslash
// ("C:\new\...") percent-escaped elsewhere, and a value ending with a backslash or a '%' next
// to another value were let through.
func TestSecretMixedEscapeKinds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		left    []string
	}{
		{"percent-escaped value in JSON text with \\/", []string{"postgres://user:p%40ss@db/x"},
			`{"dsn":"postgres:\/\/user:p%40ss@db\/x"}`, []string{"p%40ss"}},
		{"backslash value percent-escaped", []string{`C:\new\Pass word`},
			`open C:\new\Pass%20word failed`, []string{`Pass%20word`, `new\Pass`}},
		{"value ending with a backslash, percent-escaped, before another", []string{`99<z\`, "bbabaaabaJ"},
			`a99%3cz\bbabaaabaJ`, []string{"99%3cz"}},
		{"value ending with a backslash before text that makes an escape", []string{`/">_\`},
			`said: /">%5f\/">%5f\n`, []string{`%5f`}},
		{"value ending with '%' before a percent-escaped value", []string{"q7%", "1783459198940"},
			`q7%178%33%34%359%31989%340`, []string{"%33%34"}},
	} {
		v := New(tc.secrets...)
		got := v.String(tc.in)
		for _, l := range tc.left {
			if strings.Contains(got, l) {
				t.Errorf("%s: String(%q) = %q: %q left", tc.name, tc.in, got, l)
			}
		}
	}
	// In a tool result: JSON quoted in a string, '/' escaped.
	v := New("postgres://user:p%40ss@db/x")
	in := `{"content":[{"type":"text","text":"{\"dsn\":\"postgres:\\/\\/user:p%40ss@db\\/x\"}"}]}`
	if out, changed := v.JSON([]byte(in)); !changed || strings.Contains(string(out), "p%40ss") {
		t.Errorf("JSON(%s) = %s, %v: the DSN is still there", in, out, changed)
	}
}

// TestSecretJSONInURL: JSON text percent-escaped (a query parameter holding JSON, as Python's
// json.dumps then urlencode write it) spells a value's non-ASCII characters as \u escapes under
// percent escapes ("p%5Cu00e4sswort"): decoded once, the text holds "p\u00e4sswort", which is
// no form; it is decoded once more.
func TestSecretJSONInURL(t *testing.T) {
	v := New("pässwort", "tok/en<42>")
	for _, in := range []string{
		`GET /?q=%7B%22pw%22%3A%22p%5Cu00e4sswort%22%7D`,
		`GET /?q=%7B%22pw%22%3A%22p%5cu00E4sswort%22%7D`,
		`GET /?q=%7B%22t%22%3A%22tok%5C%2Fen%5Cu003C42%5Cu003E%22%7D`,
	} {
		if got := v.String(in); strings.Contains(got, "sswort") || strings.Contains(got, "42") {
			t.Errorf("String(%q) = %q: the secret is left", in, got)
		}
		raw := `{"url":"` + in + `"}`
		if out, changed := v.JSON([]byte(raw)); !changed || strings.Contains(string(out), "sswort") || strings.Contains(string(out), "42") {
			t.Errorf("JSON(%s) = %s, %v: the secret is left", raw, out, changed)
		}
	}
}
