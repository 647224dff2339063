package registrysync

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// failingPosts answers POSTs with 500 and a body of about a megabyte (an error page, a stack
// trace) holding the secret while fail is set (pings too when failPing is), as a broken server
// or a proxy may.
type failingPosts struct {
	next     http.Handler
	fail     atomic.Bool
	failPing atomic.Bool
}

const bigBodySecret = "tok-Zq9Wm2Xr7Tn5Vb1Hy6"

func (f *failingPosts) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if f.fail.Load() && req.Method == http.MethodPost {
		body, _ := io.ReadAll(req.Body)
		if !f.failPing.Load() && bytes.Contains(body, []byte(`"ping"`)) {
			req.Body = io.NopCloser(bytes.NewReader(body))
			f.next.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "internal error with "+bigBodySecret+": "+strings.Repeat("at frame x\n", (1200<<10)/11))
		return
	}
	f.next.ServeHTTP(w, req)
}

// maxQuotedLine bounds a log line or a reply that quotes a server's error text: the quote is
// at most 1000 bytes, the rest is the message's own words.
const maxQuotedLine = 4 << 10

// TestServerErrorBodiesQuotedBounded: an HTTP server whose answers fail with a body of about a
// megabyte (mcp-go quotes it whole in its error) has it quoted, redacted and cut, in the
// dispatch reply, the relist reply and the log: the dispatch reply was over NATS's max payload
// and replaced by result_too_large, "the call ran", where the call's outcome is unknown; the
// relist reply by a dispatch's result_too_large; and every log line held the megabyte. The
// relist is answered so both when the list alone fails and when the connection is lost with it.
func TestServerErrorBodiesQuotedBounded(t *testing.T) {
	var ran atomic.Int32
	fp := &failingPosts{next: server.NewStreamableHTTPServer(echoCounted(&ran), server.WithStateful(true))}
	ts := httptest.NewServer(fp)
	t.Cleanup(ts.Close)
	sc := ServerConfig{Name: "gw", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25", Secrets: []string{bigBodySecret}}
	cfg := fastConfig(sc)
	// (no retry of a failed list behind the test's back: the re-lists below are the ones that
	// fail, the last one losing the connection)
	cfg.BackoffInitial, cfg.BackoffMax = time.Hour, time.Hour
	h, logs := runLogged(t, cfg)
	rec := record(t, h.env, subjects.RegistryServer("gw"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	fp.fail.Store(true)

	r := dispatch(t, h, "gw", subjects.DispatchRequest{V: 1, Tool: "echo"})
	if r.Error == nil || r.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("dispatch answered %+v; want %s", r.Error, subjects.CodeOutcomeUnknown)
	} else if len(r.Error.Message) > maxQuotedLine || strings.Contains(r.Error.Message, bigBodySecret) ||
		!strings.Contains(r.Error.Message, "internal error with [redacted]") {
		t.Errorf("dispatch message of %d bytes: %.200q…", len(r.Error.Message), r.Error.Message)
	}

	for _, lost := range []bool{false, true} {
		fp.failPing.Store(lost)
		rr := relist(t, h, "gw", subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
		if rr.Error == nil || rr.Error.Code != subjects.CodeUnavailable {
			t.Errorf("relist (connection lost %v) answered %+v; want %s", lost, rr.Error, subjects.CodeUnavailable)
		} else if len(rr.Error.Reason) > maxQuotedLine || strings.Contains(rr.Error.Reason, bigBodySecret) {
			t.Errorf("relist (connection lost %v) reason of %d bytes: %.200q…", lost, len(rr.Error.Reason), rr.Error.Reason)
		}
	}

	listFailed := false
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "list failed") {
			listFailed = true
		}
		if len(l) > maxQuotedLine || strings.Contains(l, bigBodySecret) {
			t.Errorf("log line of %d bytes: %.300q…", len(l), l)
		}
	}
	if !listFailed {
		t.Error("no list failed log line")
	}
}
