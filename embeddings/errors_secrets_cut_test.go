package embeddings

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStatusErrorNoPartialURLSecretOnReadError: what TestStatusErrorNoPartialKeyOnReadError
// checks of the key, for the other secrets (Secrets: the URL's password and credential query
// parameters, the ${ENV_VAR} values in it). An endpoint that echoes its request URL in an
// error body, and loses the connection in the middle of the echo, had the start of the URL's
// credential quoted in the error (in search replies, the indexer's log, audit events): only the
// key's start was dropped.
func TestStatusErrorNoPartialURLSecretOnReadError(t *testing.T) {
	const secret = "qs-Secret-0123456789ABCDEF"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000") // more than is sent: the client's read fails
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"bad url /v1/embeddings?api_key=`+secret[:20])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection is cut
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/v1?api_key=" + secret, Model: "m", APIKey: "sk-the-key-0123456789", Secrets: []string{secret}}
	_, err := c.Embed(t.Context(), []string{"a"})
	e := asError(t, err)
	noKeyPrefix(t, e.Message, secret)
}

// TestStatusErrorNoPartialEscapedSecretOnReadError: the same, for a credential the URL holds
// percent-escaped (a token with '+' or '/' in a query parameter is sent as %2B, %2F): the
// echo cut in the middle of the escaped spelling ("qs%2BSecret%2F01") kept it, decoded the
// start of the value, since only its spelling as it is was looked for at the cut.
func TestStatusErrorNoPartialEscapedSecretOnReadError(t *testing.T) {
	const secret = "qs+Secret/0123456789ABCDEF"
	const escaped = "qs%2BSecret%2F0123456789ABCDEF"
	for _, cut := range []int{16, 13} { // after "%2F01"; inside "%2F"
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"bad url /v1/embeddings?api_key=`+escaped[:cut])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}))
		c := &Client{BaseURL: srv.URL + "/v1?api_key=" + escaped, Model: "m", APIKey: "sk-the-key-0123456789", Secrets: []string{secret}}
		_, err := c.Embed(t.Context(), []string{"a"})
		srv.Close()
		e := asError(t, err)
		if strings.Contains(e.Message, "qs%2BSe") {
			t.Errorf("cut at %d: the message holds the start of the escaped secret: %q", cut, e.Message)
		}
	}
}
