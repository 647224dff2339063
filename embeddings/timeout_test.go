package embeddings

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestDefaultTimeoutYieldsToDeadline: with Client.HTTP nil, the caller's context deadline
// bounds a request, not the default client's own timeout: the indexer gives a background batch
// a minute (and a request embedding the configured search.embeddings.timeout), which the
// default's 30 s used to cut short, so a slow endpoint (CPU inference of 64 long texts) timed
// out on every batch and no tool ever got a vector. Without a deadline the default still holds.
func TestDefaultTimeoutYieldsToDeadline(t *testing.T) {
	saved := defaultHTTP
	defaultHTTP = &http.Client{Timeout: 20 * time.Millisecond} // stands in for the 30 s
	t.Cleanup(func() { defaultHTTP = saved })
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // slower than the default timeout
		case <-time.After(200 * time.Millisecond):
		case <-release:
		}
		fmt.Fprint(w, `{"data":[{"index":0,"embedding":[1,2]}]}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first

	c := &Client{BaseURL: srv.URL, Model: "m"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.Embed(ctx, []string{"a"}); err != nil {
		t.Errorf("with a deadline of a minute: %v", err)
	}
	e := asError(t, func() error { _, err := c.Embed(t.Context(), []string{"a"}); return err }())
	if e.Code != CodeUnavailable || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("without a deadline: %v, want the default timeout", e)
	}
}
