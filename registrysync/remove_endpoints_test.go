package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRemovedServerEndpointsGo: a server removed from one registrysync process is no longer
// answered for by it over NATS: once another process runs it, its calls and re-lists all reach
// that one (in the shared queue group, the old endpoints answered not_found for part of them).
func TestRemovedServerEndpointsGo(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	a := run(t, nil, fastConfig(ServerConfig{Name: "mv", URL: url}))
	rec := record(t, a.env, subjects.RegistryServer("mv"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if err := a.m.Remove(context.Background(), "mv"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, subj := range []string{subjects.Dispatch("mv"), subjects.Relist("mv")} {
		msg, err := a.env.NC.Request(subj, []byte(`{"v":1,"tool":"echo"}`), waitLimit)
		if !errors.Is(err, nats.ErrNoResponders) {
			data := ""
			if msg != nil {
				data = string(msg.Data)
			}
			t.Errorf("%s after Remove: %v %s, want no responders", subj, err, data)
		}
	}

	// Another process runs it now: every call reaches that one.
	b := run(t, a.env, fastConfig())
	waitUntil(t, "b started", b.m.Ready)
	if err := b.m.Add(context.Background(), ServerConfig{Name: "mv", URL: url}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	waitUntil(t, "mv ready on b", func() bool { return b.m.Statuses()["mv"].Status == subjects.StatusReady })
	for i := range 16 {
		args, _ := json.Marshal(map[string]any{"text": "hi"})
		if r := dispatch(t, b, "mv", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: args}); r.Error != nil {
			t.Fatalf("call %d of mv, moved to another process: %+v", i, r.Error)
		}
	}
}
