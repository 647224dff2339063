package embeddings

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRetryAfter: a 429 or 503 with Retry-After (seconds or an HTTP date) says how long the
// endpoint asks to be left alone: Error.RetryAfter, at most maxRetryAfter, 0 when absent or
// unusable. It used to be dropped, and callers retried on their own schedule (the indexer's
// vectorizer after 1 s, 2 s, 4 s... against an endpoint that asked for a minute).
func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		status      int
		header      string
		min, max    time.Duration
		description string
	}{
		{http.StatusTooManyRequests, "60", 60 * time.Second, 60 * time.Second, "seconds"},
		{http.StatusServiceUnavailable, "5", 5 * time.Second, 5 * time.Second, "503 seconds"},
		{http.StatusTooManyRequests, date, 80 * time.Second, 91 * time.Second, "HTTP date"},
		{http.StatusTooManyRequests, "999999999999", maxRetryAfter, maxRetryAfter, "bounded"},
		{http.StatusTooManyRequests, "-5", 0, 0, "negative"},
		{http.StatusTooManyRequests, "soon", 0, 0, "garbage"},
		{http.StatusTooManyRequests, "", 0, 0, "absent"},
		{http.StatusTooManyRequests, time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0, "past date"},
		{http.StatusBadRequest, "60", 0, 0, "not a retry status"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				http.Error(w, `{"error":{"message":"Rate limit reached"}}`, tt.status)
			}))
			defer srv.Close()
			c := &Client{BaseURL: srv.URL + "/v1", Model: "m", APIKey: testKey}
			_, err := c.Embed(t.Context(), texts(1))
			e := asError(t, err)
			if e.RetryAfter < tt.min || e.RetryAfter > tt.max {
				t.Errorf("RetryAfter %v, want within [%v, %v]", e.RetryAfter, tt.min, tt.max)
			}
		})
	}
}
