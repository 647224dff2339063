package embeddings

import (
	"io"
	"net/http"
	"net/http/httptest"
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
		noKeyPrefix(t, e.Message, key)
	}
}

// TestStatusErrorNoPartialKeyOnReadError: a body cut by a failed read (the connection lost in
// the middle of an error body that echoes the key) must not get part of the key into the error
// either: the cut is the same as the read limit's, only shorter.
func TestStatusErrorNoPartialKeyOnReadError(t *testing.T) {
	const key = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000") // more than is sent: the client's read fails
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"bad key `+key[:30])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection is cut
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Model: "m", APIKey: key}
	_, err := c.Embed(t.Context(), []string{"a"})
	e := asError(t, err)
	noKeyPrefix(t, e.Message, key)
}

// noKeyPrefix fails t if msg holds 8 or more leading bytes of key.
func noKeyPrefix(t *testing.T, msg, key string) {
	t.Helper()
	for n := 8; n <= len(key); n++ {
		if strings.Contains(msg, key[:n]) {
			t.Errorf("message %q holds %d bytes of the API key", msg, n)
			return
		}
	}
}
