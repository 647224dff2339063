package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// relistHandlers counts the goroutines of the relist and dispatch endpoints (Manager.handle).
func relistHandlers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "registrysync.(*Manager).handle.func1(")
}

// A flood of relist requests for a server whose list is slow does not grow the process by a
// goroutine per request: at most maxRelistWaiting wait, and the rest are answered unavailable
// at once.
func TestRelistFloodBounded(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	inner := server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if hold.Load() && bytes.Contains(body, []byte(`"tools/list"`)) {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	env := natstest.Start(t)
	h := run(t, env, fastConfig(ServerConfig{Name: "fx", Transport: TransportHTTP, Kinds: []string{"tools"}, URL: ts.URL + "/mcp"}))
	t.Cleanup(free) // (runs before the harness stops: its re-lists finish)
	rec := record(t, env, subjects.RegistryServer("fx"))
	rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))

	hold.Store(true)
	base := relistHandlers()
	const n = maxRelistWaiting + 100
	inbox := nats.NewInbox()
	var busy atomic.Int64
	sub, err := env.NC.Subscribe(inbox, func(m *nats.Msg) {
		var r subjects.RelistReply
		if json.Unmarshal(m.Data, &r) == nil && r.Error != nil && r.Error.Code == subjects.CodeUnavailable {
			busy.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	data, _ := json.Marshal(subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
	for range n {
		if err := env.NC.PublishRequest(subjects.Relist("fx"), inbox, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	h.m.mu.Lock()
	served := h.m.served["fx"][0]
	h.m.mu.Unlock()
	waitUntil(t, "every relist request delivered", func() bool {
		d, _ := served.Delivered()
		return d >= n
	})
	waitUntil(t, "at most maxRelistWaiting relist handlers", func() bool {
		return relistHandlers()-base <= maxRelistWaiting
	})
	waitUntil(t, "the requests past the bound answered unavailable", func() bool { return busy.Load() >= n-maxRelistWaiting })
	free()
	// The ones that waited are served once the list flows again, and then a new one.
	waitUntil(t, "the waiting re-lists served", func() bool { return relistHandlers() <= base })
	rep := relist(t, h, "fx", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools})
	if rep.Error != nil {
		t.Fatalf("re-list after the flood: %+v", rep.Error)
	}
}
