package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// A registry event whose payload names another server than its subject is ignored by the
// executor's view, as the catalog ignores it: NATS permissions pin publishers to subjects, so a
// publisher allowed only on one server's subjects must not restore (or list, or mark ready)
// another server's tools. Here a "restore everything" of kb arrives on other's subject: kb's
// revoked tool must stay revoked.
func TestRegistryRefusesPayloadOfAnotherServer(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reg := newRegistry(zerolog.Nop())
	ready := make(chan struct{})
	done := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	go func() { done <- reg.follow(fctx, env.JS, ready) }()
	t.Cleanup(func() { stop(); <-done })

	publish := func(subject string, v any) uint64 {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := env.JS.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	item, _ := json.Marshal(map[string]any{"name": "drop", "inputSchema": map[string]any{"type": "object"}})
	publish(subjects.RegistryStatus("kb"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "kb", Status: subjects.StatusReady})
	publish(subjects.RegistrySnapshot("kb", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "kb", Kind: subjects.KindTools, Fingerprint: "fp", ListedAt: time.Now().UTC(), Items: []json.RawMessage{item}})
	publish(subjects.RegistryRevoked("kb"), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb", Tools: []string{"drop"}})
	seq := publish(subjects.RegistryRevoked("other"), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb", Restore: []string{"*"}})
	if err := reg.waitApplied(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if got := reg.view.Tool("kb", "drop"); got.State != staleness.Revoked {
		t.Errorf("kb__drop: %s (%s), want revoked: a restore published on another server's subject was applied", got.State, got.Reason)
	}
}
