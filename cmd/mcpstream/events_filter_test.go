package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPickStreamFilterMatchesNothing: a --subject filter no stored subject can match (a stream's
// name alone, a registry event without its kind, one token too many) is refused with the shape
// of the stream's subjects, not replayed as an empty history.
func TestPickStreamFilterMatchesNothing(t *testing.T) {
	for _, f := range []string{
		"registry", "audit", "results", "mcpstream.v1.registry", "registry.kb",
		"registry.*.snapshot", "registry.kb.changed", "registry.*.status.>", "registry.kb.status.x",
		"registry.kb.snapshot.tools.x", "registry.kb.snapshot.tools.>", "registry.*.*.*.*",
		"results.acme", "results.acme.c1.x", "results.*.*.>", "audit.acme", "audit.acme.request.x",
	} {
		if _, subs, err := pickStream("", []string{f}); !errors.Is(err, ErrBadFilter) || !strings.Contains(err.Error(), "matches no") {
			t.Errorf("pickStream(%q) = %q, %v; want ErrBadFilter: matches no subject", f, subs, err)
		}
	}
	for _, f := range []string{
		"registry.>", "registry.kb.>", "registry.*.status", "registry.kb.revoked", "registry.*.snapshot.*",
		"registry.kb.changed.tools", "registry.*.*", "registry.*.*.*", "registry.*.*.>", "registry.kb.snapshot.>",
		"registry.*.*.tools", "results.>", "results.acme.*", "results.*.>", "audit.*.decision", "audit.acme.>",
	} {
		if _, _, err := pickStream("", []string{f}); err != nil {
			t.Errorf("pickStream(%q): %v", f, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := runCmd(t, ctx, "events", "--subject", "registry.*.snapshot", "--nats", "nats://127.0.0.1:1"); !errors.Is(err, ErrBadFilter) {
		t.Errorf("events --subject registry.*.snapshot: %v, want ErrBadFilter before connecting", err)
	}
}
