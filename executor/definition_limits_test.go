package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestDefinitionsAsCatalog: the executor keeps the definitions the catalog keeps. Of two
// definitions with one name the first counts (the catalog's; the executor used to keep the
// last, so a hostile snapshot could show a read-only tool with a strict schema in search and
// have a destructive one run); a definition over subjects.MaxDefinitionBytes or with a name over
// subjects.MaxToolNameBytes, which the catalog skips, is not callable either.
func TestDefinitionsAsCatalog(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reg := newRegistry(zerolog.Nop())
	ready := make(chan struct{})
	done := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	go func() { done <- reg.follow(fctx, env.JS, ready) }()
	t.Cleanup(func() { stop(); <-done })

	long := strings.Repeat("n", subjects.MaxToolNameBytes+1)
	big := `{"name":"big","inputSchema":{"type":"object","description":"` + strings.Repeat("x", subjects.MaxDefinitionBytes) + `"}}`
	items := []json.RawMessage{
		json.RawMessage(`{"name":"twice","inputSchema":{"type":"object","required":["a"]},"annotations":{"readOnlyHint":true}}`),
		json.RawMessage(`{"name":"twice","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}`),
		json.RawMessage(`{"name":"` + long + `","inputSchema":{"type":"object"}}`),
		json.RawMessage(big),
	}
	data, err := json.Marshal(subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: "kb", Kind: subjects.KindTools,
		Fingerprint: "fp", ListedAt: time.Now().UTC(), Items: items})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := env.JS.Publish(ctx, subjects.RegistrySnapshot("kb", subjects.KindTools), data)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.waitApplied(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	twice := reg.lookup("kb__twice")
	if twice == nil {
		t.Fatal("kb__twice unknown")
	}
	if string(twice.InputSchema) != `{"type":"object","required":["a"]}` || !twice.ReadOnly {
		t.Errorf("kb__twice: schema %s, read-only %v; want the first definition (the catalog's)", twice.InputSchema, twice.ReadOnly)
	}
	if got := reg.lookup(subjects.PublicName("kb", long)); got != nil {
		t.Errorf("a tool named with %d bytes is callable; the catalog skips names over %d", len(long), subjects.MaxToolNameBytes)
	}
	if got := reg.lookup("kb__big"); got != nil {
		t.Errorf("a %d-byte definition is callable; the catalog skips definitions over %d", len(big), subjects.MaxDefinitionBytes)
	}
}
