package registrysync

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSSEListenOutlivesResponseTimeout: over legacy HTTP+SSE with the 2026-07-28 protocol, the
// connector's subscriptions/listen request is meant to stay open for the life of the session,
// but mcp-go's SSE transport gave every request a 60 s response timeout: the listen timed out
// and the server turned unavailable (connection_lost) and reconnected every minute.
func TestSSEListenOutlivesResponseTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits past mcp-go's 60 s SSE response timeout")
	}
	t.Parallel()
	h := run(t, nil, fastConfig(ServerConfig{Name: "sse", Transport: TransportSSE, URL: sseFixture(t, newFixture(fixtureOptions{}))}))
	rec := record(t, h.env, subjects.RegistryServer("sse"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if !mcp.IsModernProtocol(ready.ev.Status.Protocol) {
		t.Fatalf("negotiated %s, which has no subscriptions/listen: the test shows nothing", ready.ev.Status.Protocol)
	}
	time.Sleep(65 * time.Second)
	for _, e := range rec.all() {
		if e.seq > ready.seq && e.ev.Status != nil && e.ev.Status.Status != subjects.StatusReady {
			t.Errorf("server left ready while idle: %s %s: %s", e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
		}
	}
}

// TestTwoManagersShareNATS: "run exactly one registrysync per set of servers" — several
// processes, each with its own servers, against one NATS. Every process subscribed to the
// dispatch and relist wildcards in one queue group, so a request for a server went to a random
// process, which answered not_found when the server was another's.
func TestTwoManagersShareNATS(t *testing.T) {
	t.Parallel()
	h1 := run(t, nil, fastConfig(ServerConfig{Name: "one", URL: httpFixture(t, newFixture(fixtureOptions{}))}))
	run(t, h1.env, fastConfig(ServerConfig{Name: "two", URL: httpFixture(t, newFixture(fixtureOptions{}))}))
	rec := record(t, h1.env, subjects.Root+".registry.>")
	for _, server := range []string{"one", "two"} {
		rec.wait(0, server+" ready", func(e event) bool { return isStatus(subjects.StatusReady, "")(e) && e.ev.Status.Server == server })
	}
	for i := 0; i < 10; i++ {
		for _, server := range []string{"one", "two"} {
			if r := dispatch(t, h1, server, subjects.DispatchRequest{V: 1, Tool: "pid"}); r.Error != nil {
				t.Fatalf("dispatch %d to %s: %+v", i, server, r.Error)
			}
			if r := relist(t, h1, server, subjects.RelistRequest{V: 1}); r.Error != nil {
				t.Fatalf("relist %d of %s: %+v", i, server, r.Error)
			}
		}
	}
}
