package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// dyingHTTP serves next until it is down, then cuts every connection. Armed, it holds the next
// tools/list (entered closes) until release closes, and goes down with it: the list in flight
// and the probe after it fail, and the session is lost while the loop is busy listing. Down
// with hold set, it holds the next request (a handshake's: held closes) until unhold closes.
type dyingHTTP struct {
	next                   http.Handler
	armed, down, hold      atomic.Bool
	entered, release, held chan struct{}
	unhold                 chan struct{}
}

func (d *dyingHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.down.Load() {
		if d.hold.CompareAndSwap(true, false) {
			close(d.held)
			<-d.unhold
		}
		panic(http.ErrAbortHandler) // the connection is cut, nothing answered
	}
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == string(mcp.MethodToolsList) && d.armed.CompareAndSwap(true, false) {
			close(d.entered)
			<-d.release
			d.down.Store(true)
			panic(http.ErrAbortHandler)
		}
	}
	d.next.ServeHTTP(w, r)
}

// A relist request that found the server connected but the loop busy (listing for another
// re-list) waited to be taken by the loop; the session was lost meanwhile, and no loop took it
// any more (the connector was reconnecting): it waited its whole deadline and was answered "the
// connector is busy" — the executor's call waited its RelistTimeout before answering unavailable.
// It is answered unavailable as soon as the session ends, saying the connection was lost and why.
func TestRelistWaitingWhenTheSessionIsLost(t *testing.T) {
	t.Parallel()
	d := &dyingHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{})),
		entered: make(chan struct{}), release: make(chan struct{}), held: make(chan struct{}), unhold: make(chan struct{})}
	ts := httptest.NewServer(d)
	t.Cleanup(ts.Close)
	var unheld atomic.Bool
	unhold := func() {
		if unheld.CompareAndSwap(false, true) {
			close(d.unhold)
		}
	}
	t.Cleanup(unhold) // (before ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "dying", URL: ts.URL + "/mcp", Kinds: []string{"tools"}}))
	waitUntil(t, "ready", h.m.Ready)
	c := h.m.connector("dying")

	d.armed.Store(true)
	ask := func() <-chan subjects.RelistReply {
		out := make(chan subjects.RelistReply, 1)
		go func() {
			// Generous: it runs out only when the answer never comes.
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			out <- h.m.Relist(ctx, "dying", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
		}()
		return out
	}
	first := ask() // taken by the loop, which holds in its tools/list
	<-d.entered
	second := ask() // the server is connected: it waits for the loop
	waitUntil(t, "the second re-list waits", func() bool { return c.relistWaiting.Load() == 2 })
	close(d.release)

	if r := <-first; r.Error == nil || r.Error.Code != subjects.CodeUnavailable {
		t.Errorf("the re-list whose list lost the session: %+v; want unavailable", r.Error)
	}
	r := <-second
	switch {
	case r.Error == nil:
		t.Fatalf("the waiting re-list succeeded (fingerprint %q) though the session was lost", r.Fingerprint)
	case r.Error.Code != subjects.CodeUnavailable || !strings.Contains(r.Error.Message, "connection") || r.Error.Reason == "":
		t.Errorf("the waiting re-list: %+v; want unavailable at once, saying the connection was lost and why (not a deadline run out)", r.Error)
	}

	// Reconnecting: refused at once, with why. Just after the loss, before its status is
	// published, that said "not connected (ready)" and no reason.
	r = <-ask()
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable || r.Error.Reason == "" ||
		!strings.Contains(r.Error.Message, "not connected") && !strings.Contains(r.Error.Message, "lost") {
		t.Errorf("a re-list while reconnecting: %+v; want unavailable, not connected or connection lost, and why", r.Error)
	}
	// So is a re-list during a handshake that hangs: it is answered while the handshake is
	// held, not after it, with the status' reason (the last failure).
	d.hold.Store(true)
	<-d.held
	r = <-ask()
	if r.Error == nil || r.Error.Code != subjects.CodeUnavailable || !strings.Contains(r.Error.Message, "not connected") || r.Error.Reason == "" {
		t.Errorf("a re-list during a held handshake: %+v; want unavailable, not connected, with the status' reason", r.Error)
	}
	unhold()
}
