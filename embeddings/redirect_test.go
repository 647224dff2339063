package embeddings

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRedirectElsewhereRefused: the shared client followed every redirect, and Go's client
// copies Authorization onto a redirected request to the same host name on any port and any
// scheme: an endpoint (or whatever answers at its address) redirecting to another port, or from
// https to http, received the API key there, in clear text for http. A redirect is followed
// within the endpoint's origin (scheme, host and port) only; another one fails the call with
// embeddings_rejected, the key sent nowhere else.
func TestRedirectElsewhereRefused(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			elsewhere.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(data(item(0, "[1,2]"))))
	}))
	defer other.Close()
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/embeddings":
			http.Redirect(w, r, other.URL+"/v1/embeddings?token=abcdefghijklmnop", http.StatusTemporaryRedirect)
		case "/moved/embeddings":
			http.Redirect(w, r, "/v1/final", http.StatusPermanentRedirect) // same origin: followed
		case "/v1/final":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(data(item(0, "[1,2]"))))
		}
	}))
	defer endpoint.Close()

	c := &Client{BaseURL: endpoint.URL + "/v1", Model: "m", APIKey: testKey}
	_, err := c.Embed(context.Background(), []string{"a"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRejected || !strings.Contains(e.Message, "redirect") {
		t.Errorf("Embed: %v, want embeddings_rejected naming the redirect", err)
	}
	if err != nil && strings.Contains(err.Error(), "abcdefghijklmnop") {
		t.Errorf("%v quotes the redirect's query", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the API key was sent to the redirect's target %d times", n)
	}

	c.BaseURL = endpoint.URL + "/moved"
	if vecs, err := c.Embed(context.Background(), []string{"a"}); err != nil || len(vecs) != 1 {
		t.Errorf("same-origin redirect: %v, %v", vecs, err)
	}
}

// TestRedirectLocationCut: the error of a redirect not followed quoted the Location's path
// whole: an endpoint (or what answers at its address) could make it as long as a response
// header may be, a megabyte, in every error message of the index. The path is cut as a
// response body's snippet is, after the key in it is redacted (a cut copy would not be).
func TestRedirectLocationCut(t *testing.T) {
	long := "/v1/" + testKey + strings.Repeat("p", 100000)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://localhost:1"+long+"?token=abcdefghijklmnop")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer endpoint.Close()

	c := &Client{BaseURL: endpoint.URL + "/v1", Model: "m", APIKey: testKey}
	_, err := c.Embed(context.Background(), []string{"a"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRejected {
		t.Fatalf("Embed: %v, want embeddings_rejected", err)
	}
	if len(e.Message) > 1000 || !strings.Contains(e.Message, "http://localhost:1/v1/") ||
		strings.Contains(e.Message, testKey) || strings.Contains(e.Message, "abcdefghijklmnop") {
		t.Errorf("message of %d bytes %.300q: want the Location's start without the key or query, cut", len(e.Message), e.Message)
	}
}
