package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// A dispatch handler that panics may have sent tools/call already: its answer is
// outcome_unknown (may have run), never a plain failure a caller would take as "did not run"
// and send again.
func TestDispatchPanicIsOutcomeUnknown(t *testing.T) {
	h := run(t, nil, fastConfig(stdioServer(t, "fx", "fixture")))
	waitUntil(t, "endpoints up", h.m.Ready)
	boom := func(string) { panic("boom after the call was sent") }
	h.m.beforeDispatch.Store(&boom)
	r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, CallID: "c1", Tool: "echo"})
	if r.Error == nil || r.Error.Code != subjects.CodeOutcomeUnknown {
		t.Errorf("got %+v, want outcome_unknown", r.Error)
	}
	// The manager still serves.
	h.m.beforeDispatch.Store(nil)
	if r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, CallID: "c2", Tool: "echo", Arguments: []byte(`{"text":"hi"}`)}); r.Error != nil {
		t.Errorf("after the panic: %+v, want a result", r.Error)
	}
}

// A dispatch message without a reply subject to answer is not run: its answer, and so the
// call's outcome, could reach nobody (only the executor dispatches, always as a request to an
// inbox).
func TestDispatchWithoutReplyNotRun(t *testing.T) {
	h := run(t, nil, fastConfig(stdioServer(t, "fx", "fixture")))
	waitUntil(t, "endpoints up", h.m.Ready)
	var mu sync.Mutex
	var ran []string
	hook := func(string) { mu.Lock(); ran = append(ran, "x"); mu.Unlock() }
	h.m.beforeDispatch.Store(&hook)
	data, _ := json.Marshal(subjects.DispatchRequest{V: 1, CallID: "fire-and-forget", Tool: "echo", Arguments: []byte(`{"text":"hi"}`)})
	if err := h.env.NC.Publish(subjects.Dispatch("fx"), data); err != nil {
		t.Fatal(err)
	}
	// Nor one whose reply subject points into mcpstream's subjects (another tenant's calls) or
	// "$" ones: the answer would be written there with the connector's permissions.
	for _, reply := range []string{subjects.Calls("globex"), "$KV.MCPSTREAM_SLOTS.tenant.globex.0"} {
		if err := h.env.NC.PublishRequest(subjects.Dispatch("fx"), reply, data); err != nil {
			t.Fatal(err)
		}
	}
	// A request after it, on the same subscription: handled once the first was taken.
	if r := dispatch(t, h, "fx", subjects.DispatchRequest{V: 1, CallID: "asked", Tool: "echo", Arguments: []byte(`{"text":"hi"}`)}); r.Error != nil {
		t.Fatalf("request: %+v", r.Error)
	}
	h.m.handlers.Wait() // every handler started has finished
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 {
		t.Errorf("%d dispatches ran, want 1 (the one asked as a request)", len(ran))
	}
}

// listCounter counts the tools/list and prompts/list requests that reach an HTTP server.
type listCounter struct {
	next           http.Handler
	lists, prompts atomic.Int32
}

func (l *listCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			l.lists.Add(1)
		}
		if bytes.Contains(body, []byte(`"prompts/list"`)) {
			l.prompts.Add(1)
		}
	}
	l.next.ServeHTTP(w, r)
}

// A relist request whose reply subject points into mcpstream's subjects or "$" ones is not
// served, as the README says of the relist endpoint: nothing runs. It used to re-list the
// server (and publish what the re-list found) and only drop the answer.
func TestRelistToUnanswerableReplyNotRun(t *testing.T) {
	lc := &listCounter{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}), server.WithStateful(true))}
	ts := httptest.NewServer(lc)
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "gw", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	waitUntil(t, "endpoints up", h.m.Ready)
	data, _ := json.Marshal(subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
	for _, reply := range []string{subjects.Calls("globex"), "$KV.MCPSTREAM_SLOTS.tenant.globex.0"} {
		if err := h.env.NC.PublishRequest(subjects.Relist("gw"), reply, data); err != nil {
			t.Fatal(err)
		}
	}
	// A request after them, on the same subscription: served once they were taken.
	if r := relist(t, h, "gw", subjects.RelistRequest{V: 1, Kind: subjects.KindTools}); r.Error != nil {
		t.Fatalf("relist: %+v", r.Error)
	}
	h.m.handlers.Wait() // every handler started has finished
	// The connector may also re-list every kind on its own (the notification stream opening
	// after the first lists, under load: a notification may have been missed). Such a re-list,
	// as the first lists, lists prompts too; a tools re-list asked on the relist subject lists
	// tools only. Once no re-list is between its tools and prompts lists, the difference is the
	// number of tools re-lists asked that ran: 1, or more if a dropped request ran (re-lists
	// asked have all ended: handlers.Wait).
	toolsOnly := func() int32 { return lc.lists.Load() - lc.prompts.Load() }
	waitUntil(t, "one tools re-list (the one asked with an inbox) to have reached the server", func() bool { return toolsOnly() == 1 })
}
