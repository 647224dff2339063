package embeddings

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRedirectChangingMethodRefused: a redirect within the endpoint's origin was followed
// whatever its status, and Go's client follows a 301, 302 or 303 to a POST with a GET without
// the body: the request that reached the final URL was not an embeddings request, and the
// error was that URL's answer to it (a 405, 404 or 400: a 400 the indexer takes for the
// tool's text refused), not the redirect, nor where it led. Such a redirect is not followed:
// the call fails with embeddings_rejected naming where it led, as a redirect elsewhere does.
// A 307 or 308, which keeps the method and the body, is still followed (redirect_test.go).
func TestRedirectChangingMethodRefused(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/embeddings"), "/r")); err == nil {
			http.Redirect(w, r, "/final/embeddings", status)
			return
		}
		if r.Method != http.MethodPost {
			gets.Add(1)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(data(item(0, "[1,2]"))))
	}))
	defer srv.Close()

	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		c := &Client{BaseURL: srv.URL + "/r" + strconv.Itoa(status), Model: "m", APIKey: testKey}
		_, err := c.Embed(t.Context(), []string{"a"})
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeRejected || e.Status != status ||
			!strings.Contains(e.Message, srv.URL+"/final/embeddings") {
			t.Errorf("HTTP %d: Embed: %v, want embeddings_rejected with status %d naming the redirect's target", status, err, status)
		}
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests without the body", n)
	}
}

// TestRedirectLoopMessage: a redirect loop within the endpoint's origin failed with "redirects
// are followed within the endpoint's origin only", which points at a redirect elsewhere.
func TestRedirectLoopMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Model: "m"}
	_, err := c.Embed(t.Context(), []string{"a"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRejected || strings.Contains(e.Message, "origin only") ||
		!strings.Contains(e.Message, "too many redirects") {
		t.Errorf("Embed: %v, want embeddings_rejected saying there were too many redirects", err)
	}
}
