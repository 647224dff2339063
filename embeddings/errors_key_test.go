package embeddings

import (
	"net/http"
	"strings"
	"testing"
)

// TestStatusErrorNoPartialKey: a server that echoes the key after leading white space (or
// after multi-byte characters the message shortens) must not get part of the key into the
// error: the quote is cut after cleaning, so a key cut by the read limit used to show.
func TestStatusErrorNoPartialKey(t *testing.T) {
	const key = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for _, lead := range []string{
		strings.Repeat("\n", 150),
		strings.Repeat("\u200b", 60),
	} {
		srv := newFake(t, func(_ int, r *http.Request, _ []string) (int, string) {
			// The key starts a little before the read limit (maxSnippet+len(key) bytes).
			pad := maxSnippet + 10 - len(lead) - len(`{"error":"bad key `)
			return http.StatusUnauthorized, lead + `{"error":"bad key ` + strings.Repeat("x", pad) + key + `"}`
		})
		c := &Client{BaseURL: srv.URL, Model: "m", APIKey: key}
		_, err := c.Embed(t.Context(), []string{"a"})
		e := asError(t, err)
		for n := 8; n <= len(key); n++ {
			if strings.Contains(e.Message, key[:n]) {
				t.Errorf("message %q holds %d bytes of the API key", e.Message, n)
				break
			}
		}
	}
}
