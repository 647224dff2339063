package registrysync

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// Add starts a server at run time; Remove publishes status removed and an empty snapshot of
// every kind the server had, and the server's calls are refused from then on.
func TestAddRemove(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	h := run(t, nil, fastConfig())
	rec := record(t, h.env, subjects.RegistryServer("late"))
	ctx := context.Background()
	waitUntil(t, "Run started", h.m.Ready)

	if err := h.m.Add(ctx, ServerConfig{Name: "late", URL: url}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := h.m.Add(ctx, ServerConfig{Name: "late", URL: url}); !errors.Is(err, ErrExists) {
		t.Errorf("second Add: %v, want ErrExists", err)
	}
	for _, bad := range []ServerConfig{
		{Name: "", URL: url},
		{Name: "x", Transport: "carrier-pigeon", URL: url},
		{Name: "x", Transport: TransportHTTP, URL: "ftp://example"},
		{Name: "x", Transport: TransportStdio},
		{Name: "x", URL: url, Kinds: []string{"widgets"}},
		{Name: "x", URL: url, ProtocolVersion: "1999-01-01"},
	} {
		if err := h.m.Add(ctx, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Add(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	rec.wait(0, "prompts", isSnapshot(subjects.KindPrompts, nil))

	if err := h.m.Remove(ctx, "late"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	removed := rec.wait(ready.seq, "removed", isStatus(subjects.StatusRemoved, ""))
	for _, k := range []subjects.Kind{subjects.KindTools, subjects.KindPrompts} {
		e := rec.wait(removed.seq, "empty "+string(k), isSnapshot(k, func(s *subjects.Snapshot) bool { return len(s.Items) == 0 }))
		if e.ev.Snapshot.Fingerprint == "" {
			t.Errorf("empty %s snapshot without fingerprint", k)
		}
	}
	for _, e := range rec.all() {
		if e.seq > removed.seq && e.ev.Snapshot != nil && e.ev.Snapshot.Kind == subjects.KindResources {
			t.Errorf("resources retracted though never listed: %s", e)
		}
	}
	if r := h.m.Dispatch(ctx, "late", subjects.DispatchRequest{V: 1, Tool: "echo"}); r.Error == nil || r.Error.Code != subjects.CodeNotFound {
		t.Errorf("dispatch after Remove: %+v", r.Error)
	}
	if _, ok := h.m.Statuses()["late"]; ok {
		t.Error("removed server still in Statuses")
	}
	if err := h.m.Remove(ctx, "never-there"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove(unknown) = %v, want ErrNotFound", err)
	}

	// Added back, it lists again: the content equals the pre-removal snapshot, but the stream's
	// current snapshot is the empty one, so it is stored again (A → empty → A).
	if err := h.m.Add(ctx, ServerConfig{Name: "late", URL: url}); err != nil {
		t.Fatalf("Add again: %v", err)
	}
	rec.wait(removed.seq, "tools again", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return len(s.Items) > 0 }))
}

// A server removed from the configuration while registrysync was down is still retracted.
func TestRemoveUnconfiguredServerWithHistory(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	h := run(t, nil, fastConfig(ServerConfig{Name: "old", URL: url}))
	rec := record(t, h.env, subjects.RegistryServer("old"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	h.stop(t)

	h2 := run(t, h.env, fastConfig())
	if err := h2.m.Remove(context.Background(), "old"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	removed := rec.wait(0, "removed", isStatus(subjects.StatusRemoved, ""))
	rec.wait(removed.seq, "empty tools", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return len(s.Items) == 0 }))
}

// A server dropped from the configuration that never connected (its stream holds statuses, no
// snapshot) is still retracted: `mcpstream servers` lists it, unavailable, and `servers remove`
// answered that the registry never saw it.
func TestRemoveUnconfiguredServerWithOnlyStatuses(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(ServerConfig{Name: "never-up", URL: "http://127.0.0.1:1/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("never-up"))
	rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	h.stop(t)
	stopped := rec.wait(0, "stopped", isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped))

	h2 := run(t, h.env, fastConfig())
	if err := h2.m.Remove(context.Background(), "never-up"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	rec.wait(stopped.seq, "removed", isStatus(subjects.StatusRemoved, ""))
}
