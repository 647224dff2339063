package embeddings

import (
	"testing"
)

// TestEmbedConfigBounds: a Dimensions above the most an embedding may have (16384) made every
// response embeddings_malformed ("more than 16384"), and a BaseURL port out of range (a typo:
// 80800) made every request a transport failure, embeddings_unavailable, which callers retry
// without end: both are the configuration's errors, known before any request.
func TestEmbedConfigBounds(t *testing.T) {
	srv := newFake(t, constant(maxDimensions+1))
	for name, c := range map[string]*Client{
		"Dimensions above 16384": {BaseURL: srv.URL, Model: "m", Dimensions: maxDimensions + 1},
		"port out of range":      {BaseURL: "http://127.0.0.1:80800/v1", Model: "m"},
		"port zero":              {BaseURL: "http://127.0.0.1:0/v1", Model: "m"},
	} {
		got, err := c.Embed(t.Context(), texts(1))
		if got != nil {
			t.Errorf("%s: got %v, want nil", name, got)
		}
		if e := asError(t, err); e.Code != CodeConfig || e.Status != 0 {
			t.Errorf("%s: %v; want %s, status 0", name, err, CodeConfig)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}
