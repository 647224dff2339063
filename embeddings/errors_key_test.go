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

// TestStatusErrorEscapedKey: an endpoint that echoes the key in a JSON error body may spell its
// characters with escapes Go does not write ("\/" for '/', as PHP and older JSON libraries do;
// "\u0073" for 's'): the key must not reach the error through them. A body that cannot be
// decoded is quoted only when no escape is left in it once redacted.
func TestStatusErrorEscapedKey(t *testing.T) {
	const key = "sk-proj/AbCdEf0123456789+xyz"
	tests := []struct {
		name, body string
		wantQuote  string // "" when the body must be withheld
	}{
		{"slash escaped", `{"error":{"message":"Incorrect API key provided: sk-proj\/AbCdEf0123456789+xyz."}}`,
			`{"error":{"message":"Incorrect API key provided: [redacted]."}}`},
		{"unicode escapes", `{"error":"bad key \u0073k-proj\u002FAbCdEf0123456789\u002bxyz"}`,
			`{"error":"bad key [redacted]"}`},
		// Text that is not JSON is searched decoded too (package redact): the key spelled
		// with escapes is found and redacted, and the rest quoted.
		{"not JSON", `bad key sk-proj\/AbCdEf0123456789+xyz`, `bad key [redacted]`},
		// Escapes left in such text after that may spell something redact cannot check.
		{"not JSON, escapes left", `bad key sk-proj\/AbCd \u0073k`, ""},
		{"plain JSON without the key keeps its escapes", `{"error":"see https:\/\/example.com\/docs"}`,
			`{"error":"see https:\/\/example.com\/docs"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, func(int, *http.Request, []string) (int, string) {
				return http.StatusUnauthorized, tt.body
			})
			c := &Client{BaseURL: srv.URL, Model: "m", APIKey: key}
			_, err := c.Embed(t.Context(), []string{"a"})
			e := asError(t, err)
			for _, part := range []string{"AbCdEf0123456789", `proj\/`, `u0073k`} {
				if strings.Contains(e.Message, part) {
					t.Fatalf("message %q holds part of the API key (%q)", e.Message, part)
				}
			}
			want := "HTTP 401 Unauthorized: " + tt.wantQuote
			if tt.wantQuote == "" {
				want = "HTTP 401 Unauthorized: (response body withheld"
			}
			if !strings.HasPrefix(e.Message, want) {
				t.Errorf("message = %q, want prefix %q", e.Message, want)
			}
		})
	}
}

// TestStatusErrorSecrets: Secrets (values a configuration resolved into the URL) are redacted
// from errors as the key is.
func TestStatusErrorSecrets(t *testing.T) {
	srv := newFake(t, func(int, *http.Request, []string) (int, string) {
		return http.StatusNotFound, `{"error":"no deployment tenant-4711-secret"}`
	})
	c := &Client{BaseURL: srv.URL, Model: "m", Secrets: []string{"tenant-4711-secret"}}
	_, err := c.Embed(t.Context(), []string{"a"})
	if e := asError(t, err); strings.Contains(e.Message, "4711") {
		t.Errorf("message %q holds a secret", e.Message)
	}
}
