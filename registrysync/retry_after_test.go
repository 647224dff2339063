package registrysync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// chosenWaits runs a Manager with cfg, and returns the waits its connector for server chose
// before its next attempt of kind what ("connect", "reconnect", "relist"), as they are chosen.
func chosenWaits(t *testing.T, cfg Config, name, what string) (*harness, <-chan time.Duration) {
	t.Helper()
	waits := make(chan time.Duration, 64)
	h := runWith(t, nil, cfg, func(m *Manager) {
		hook := func(server, w string, d time.Duration) {
			if server == name && w == what {
				select {
				case waits <- d:
				default:
				}
			}
		}
		m.retryChosen.Store(&hook)
	})
	return h, waits
}

func firstWait(t *testing.T, waits <-chan time.Duration, what string) time.Duration {
	t.Helper()
	select {
	case d := <-waits:
		return d
	case <-time.After(waitLimit):
		t.Fatalf("no %s wait chosen within %s", what, waitLimit)
		return 0
	}
}

// An HTTP server that refuses the handshake 503 (or 429) with a Retry-After was retried on the
// connector's own exponential schedule (50 ms here), sooner than it asked: the wait before the
// next attempt is at least its Retry-After, in seconds or as an HTTP date, up to
// maxRetryAfterWait; a malformed one is ignored.
func TestConnectWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		status      int
		retryAfter  func() string
		least, most time.Duration
	}{
		{"seconds/503", http.StatusServiceUnavailable, func() string { return "7" }, 7 * time.Second, 7 * time.Second},
		{"seconds/429", http.StatusTooManyRequests, func() string { return "5" }, 5 * time.Second, 5 * time.Second},
		// An HTTP date has a resolution of a second, and the clock runs on meanwhile.
		{"date", http.StatusServiceUnavailable, func() string { return time.Now().Add(40 * time.Second).UTC().Format(http.TimeFormat) }, 35 * time.Second, 40 * time.Second},
		{"hostile", http.StatusServiceUnavailable, func() string { return "31536000" }, maxRetryAfterWait, maxRetryAfterWait},
		// The backoff's own wait: BackoffMax 400 ms, jitter 20%.
		{"malformed", http.StatusServiceUnavailable, func() string { return "soon" }, 0, 480 * time.Millisecond},
		{"past", http.StatusServiceUnavailable, func() string { return "Mon, 02 Jan 2006 15:04:05 GMT" }, 0, 480 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", tc.retryAfter())
				http.Error(w, "busy", tc.status)
			}))
			t.Cleanup(ts.Close)
			h, waits := chosenWaits(t, fastConfig(ServerConfig{Name: "busy", URL: ts.URL + "/mcp"}), "busy", "connect")
			rec := record(t, h.env, subjects.RegistryServer("busy"))
			d := firstWait(t, waits, "connect")
			if d < tc.least || d > tc.most {
				t.Errorf("the connector chose to wait %s before connecting again; want %s to %s", d, tc.least, tc.most)
			}
			st := rec.wait(0, "connect_failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed)).ev.Status
			if st.RetryInMs != d.Milliseconds() {
				t.Errorf("status says retryInMs %d; the connector waits %s", st.RetryInMs, d)
			}
		})
	}
}

// listRefusing serves next, but answers tools/list 503 with Retry-After while refuse is set.
type listRefusing struct {
	next   http.Handler
	refuse atomic.Bool
}

func (l *listRefusing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && l.refuse.Load() {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method == string(mcp.MethodToolsList) {
			w.Header().Set("Retry-After", "9")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
	}
	l.next.ServeHTTP(w, r)
}

// A tools/list an HTTP server refuses 503 with a Retry-After (the session is fine: a ping
// passes) is listed again no sooner than it asked, not after the list backoff (50 ms here).
func TestRelistWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	lr := &listRefusing{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))}
	lr.refuse.Store(true)
	ts := httptest.NewServer(lr)
	t.Cleanup(ts.Close)
	h, waits := chosenWaits(t, fastConfig(ServerConfig{Name: "busylist", URL: ts.URL + "/mcp"}), "busylist", "relist")
	rec := record(t, h.env, subjects.RegistryServer("busylist"))
	rec.wait(0, "list_failed", isStatus(subjects.StatusUnavailable, subjects.CodeListFailed))
	if d := firstWait(t, waits, "relist"); d < 9*time.Second || d > 9*time.Second {
		t.Errorf("the connector chose to list again after %s; the server asked for 9s", d)
	}
}

// The wait after a failure is the backoff's, or the Retry-After of its HTTP 429 or 503 if
// longer (seconds or an HTTP date, at most maxRetryAfterWait); other statuses, malformed and
// past values are ignored.
func TestRetryWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	base := errors.New("refused")
	cases := []struct {
		status     int
		retryAfter string
		backoff    time.Duration
		want       time.Duration
	}{
		{503, "3", 100 * time.Millisecond, 3 * time.Second},
		{429, " 3 ", 100 * time.Millisecond, 3 * time.Second},
		{503, "3", 5 * time.Second, 5 * time.Second}, // never shorter than the backoff
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), time.Second, 90 * time.Second},
		{503, now.Add(-time.Minute).Format(http.TimeFormat), time.Second, time.Second},
		{503, "31536000", time.Second, maxRetryAfterWait},
		{503, now.AddDate(1, 0, 0).Format(http.TimeFormat), time.Second, maxRetryAfterWait},
		{503, "-5", time.Second, time.Second},
		{503, "1.5", time.Second, time.Second},
		{503, "soon", time.Second, time.Second},
		{503, "", time.Second, time.Second},
		{500, "30", time.Second, time.Second},
		{502, "30", time.Second, time.Second},
		{200, "30", time.Second, time.Second},
	}
	for _, tc := range cases {
		cp := &capture{status: tc.status, retryAfter: tc.retryAfter}
		err := withRetryAfter(base, cp, now)
		if got := retryWait(tc.backoff, fmt.Errorf("list: %w", err)); got != tc.want {
			t.Errorf("HTTP %d, Retry-After %q, backoff %s: wait %s; want %s", tc.status, tc.retryAfter, tc.backoff, got, tc.want)
		}
		if !errors.Is(err, base) || err.Error() != base.Error() {
			t.Errorf("HTTP %d, Retry-After %q: %v does not stand for %v", tc.status, tc.retryAfter, err, base)
		}
	}
	if err := withRetryAfter(nil, &capture{status: 503, retryAfter: "3"}, now); err != nil {
		t.Errorf("no failure became %v", err)
	}
}

// A Retry-After counts from the answer that carried it. Every re-list the session makes while a
// kind's failure stands (another kind's list_changed, a resync, an on-demand re-list) arms the
// retry timer again: it applied the failed list's whole Retry-After again from then, so the
// retry the server allowed after 9 s was pushed back by each of them (never made while they
// kept coming at least every 9 s). The wait chosen after another kind's re-list is what is left
// of the 9 s.
func TestRelistRetryAfterNotPushedBack(t *testing.T) {
	t.Parallel()
	lr := &listRefusing{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))}
	lr.refuse.Store(true)
	ts := httptest.NewServer(lr)
	t.Cleanup(ts.Close)
	h, waits := chosenWaits(t, fastConfig(ServerConfig{Name: "busylist2", URL: ts.URL + "/mcp"}), "busylist2", "relist")
	rec := record(t, h.env, subjects.RegistryServer("busylist2"))
	rec.wait(0, "list_failed", isStatus(subjects.StatusUnavailable, subjects.CodeListFailed))
	first := firstWait(t, waits, "relist")
	if first != 9*time.Second {
		t.Fatalf("the connector chose to list again after %s; the server asked for 9s", first)
	}
	// Prompts list fine; tools still failed: the retry timer is armed again.
	if rep := relist(t, h, "busylist2", subjects.RelistRequest{V: 1, Kind: subjects.KindPrompts}); rep.Error != nil {
		t.Fatalf("relist prompts: %+v", rep.Error)
	}
	second := firstWait(t, waits, "relist")
	if second >= first {
		t.Errorf("after a prompts re-list the tools retry waits %s again; the server asked for 9s from its answer, %s before", second, first)
	}
}
