package embeddings

import (
	"io"
	"net/http"
	"net/http/httptest"
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
