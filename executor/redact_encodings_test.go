package executor

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Secrets a tool echoes in another spelling — a numeric secret as a number in exponent form,
// a secret in base64, percent-escaped, or split by JSON escapes — are redacted from the audit
// payload, whether the result fits the cap (decoded and walked) or is far over it (redacted as
// it is read: redactPrefix).
func TestAuditRedactsEncodedSecrets(t *testing.T) {
	r := newRedactor([]string{"8675309", "tok/en+s3cret"})
	huge := strings.Repeat("lorem ipsum ", 50_000)
	for name, tc := range map[string]struct{ doc, leak string }{
		"exponent":     {`{"pin":8.675309e6,"text":"%s"}`, "8.675309e6"},
		"base64":       {`{"text":"hdr ` + base64.StdEncoding.EncodeToString([]byte("Bearer tok/en+s3cret")) + ` %s"}`, base64.StdEncoding.EncodeToString([]byte("Bearer tok/en+s3cret"))[4:16]},
		"percent":      {`{"text":"GET /x?k=` + url.QueryEscape("tok/en+s3cret") + ` %s"}`, url.QueryEscape("tok/en+s3cret")},
		"json in json": {`{"text":"{\"k\":\"tok\\u002fen+s3cret\"} %s"}`, `s3cret`},
	} {
		for _, size := range []string{"small", "over the cap"} {
			pad := "x"
			if size != "small" {
				pad = huge
			}
			raw := []byte(strings.Replace(tc.doc, "%s", pad, 1))
			if !json.Valid(raw) {
				t.Fatalf("%s: test document is not JSON", name)
			}
			out, _ := r.JSON(raw, 4096)
			if strings.Contains(string(out), tc.leak) {
				t.Errorf("%s, %s: %q kept: %.300s", name, size, tc.leak, out)
			}
		}
	}
}

// BenchmarkRedactorClean: the check every audited result goes through (no key, no secret:
// passed on as it is), on a typical 2 KB result, with 1 and 30 configured secrets.
func BenchmarkRedactorClean(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("Travel policy: economy class for flights under 6 hours, per diem as listed; hotels up to the city cap. ", 20) + `"}],"isError":false}`)
	for _, n := range []int{1, 30} {
		secrets := make([]string, n)
		for i := range secrets {
			secrets[i] = fmt.Sprintf("sk-live-%08x-%d", i*2654435761, i)
		}
		r := newRedactor(secrets)
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if !r.clean(raw) {
					b.Fatal("not clean")
				}
			}
		})
	}
}
