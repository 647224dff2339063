package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// sseCancelGrace is how long the server below holds a notifications/cancelled before handling
// it, unless the session's event stream ends first: a client that cut the stream before sending
// it is caught in the act, whatever the order the server would have seen the two in.
const sseCancelGrace = time.Second

// A 2026-07-28 session over legacy HTTP+SSE, closed (its server removed), cancels its
// subscriptions/listen while its event stream is still open: an SSE server ends a session, and
// forgets it, when its event stream closes (mcp-go's answers a message for it "Invalid session
// ID"), and a cancellation that came after was refused, the listen request held on the server
// for good. The session's stream was cut (the session's context) before the cancellation was
// sent: whether it was honoured was a race between two connections.
func TestSSECloseCancelsListenBeforeTheStreamEnds(t *testing.T) {
	sse := server.NewSSEServer(newFixture(fixtureOptions{}))
	var (
		mu        sync.Mutex
		listenIDs []string                     // ids of the subscriptions/listen requests sent
		cancelled []string                     // requestId of each notifications/cancelled
		statuses  []int                        // the SSE server's status for each
		streamEnd = map[string]chan struct{}{} // session id → closed when its event stream ended
		streams   = make(chan string, 8)       // session ids, as their streams open
	)
	rec := func(w http.ResponseWriter, status *int) http.ResponseWriter {
		return &statusWriter{ResponseWriter: w, status: status}
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ended := make(chan struct{})
			sw := &sessionSniffer{ResponseWriter: w, found: func(id string) {
				mu.Lock()
				streamEnd[id] = ended
				mu.Unlock()
				streams <- id
			}}
			defer close(ended)
			sse.ServeHTTP(sw, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		switch msg.Method {
		case "subscriptions/listen":
			mu.Lock()
			listenIDs = append(listenIDs, string(msg.ID))
			mu.Unlock()
		case "notifications/cancelled":
			mu.Lock()
			ended := streamEnd[r.URL.Query().Get("sessionId")]
			mu.Unlock()
			select {
			case <-ended:
			case <-time.After(sseCancelGrace):
			}
			var status int
			sse.ServeHTTP(rec(w, &status), r)
			mu.Lock()
			cancelled = append(cancelled, string(msg.Params.RequestID))
			statuses = append(statuses, status)
			mu.Unlock()
			return
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	server.WithBaseURL(ts.URL)(sse)

	h := run(t, nil, fastConfig())
	waitUntil(t, "running", h.m.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.m.Add(ctx, ServerConfig{Name: "web", Transport: TransportSSE, URL: ts.URL + "/sse"}); err != nil {
		t.Fatal(err)
	}
	rec0 := record(t, h.env, subjects.RegistryServer("web"))
	rec0.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	waitUntil(t, "subscriptions/listen sent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(listenIDs) > 0
	})
	session := <-streams
	if err := h.m.Remove(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "notifications/cancelled handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cancelled) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(cancelled) != 1 || cancelled[0] != listenIDs[len(listenIDs)-1] {
		t.Errorf("cancelled %v, want the last subscriptions/listen of %v", cancelled, listenIDs)
	}
	if statuses[0] != http.StatusAccepted {
		t.Errorf("the SSE server answered the cancellation %d (want 202): session %s's event stream had ended, the server forgot the session, and its subscriptions/listen is never cancelled", statuses[0], session)
	}
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status *int
}

func (w *statusWriter) WriteHeader(code int) {
	*w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if *w.status == 0 {
		*w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// sessionSniffer passes an SSE stream on and reports the session id of its endpoint event.
type sessionSniffer struct {
	http.ResponseWriter
	found func(id string)
	done  bool
}

func (w *sessionSniffer) Write(b []byte) (int, error) {
	if !w.done {
		if _, rest, ok := strings.Cut(string(b), "sessionId="); ok {
			w.done = true
			id, _, _ := strings.Cut(rest, "\r")
			id, _, _ = strings.Cut(id, "\n")
			w.found(id)
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionSniffer) Flush() { w.ResponseWriter.(http.Flusher).Flush() }
