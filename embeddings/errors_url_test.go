package embeddings

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTransportErrorNoURLSecret: a transport error must not quote the endpoint URL, whose query
// parameters (kept from BaseURL) may carry a credential (?api-key=..., ?key=...): the message
// is logged. It used to be net/http's text, `Post "URL": ...`, which strips only a password.
func TestTransportErrorNoURLSecret(t *testing.T) {
	const secret = "sk-query-0123456789"
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/v1?api-key=" + secret
	srv.Close() // nothing listens any more: the request fails in transport
	for _, hc := range []*http.Client{nil, {Transport: http.DefaultTransport}} {
		c := &Client{BaseURL: base, Model: "m", HTTP: hc}
		_, err := c.Embed(t.Context(), []string{"a"})
		e := asError(t, err)
		if e.Code != CodeUnavailable {
			t.Errorf("code %s, want %s", e.Code, CodeUnavailable)
		}
		if strings.Contains(e.Message, secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("error %q holds the URL's query secret", err)
		}
		if !strings.Contains(e.Message, "refused") {
			t.Errorf("message %q lost the transport cause", e.Message)
		}
	}
}
