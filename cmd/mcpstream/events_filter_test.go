package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
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

// TestEventsServerNeverSeen: --server NAME of a server the registry never saw (a typo) printed
// nothing and exited 0, exactly as a known server with nothing to show: the user could not tell
// "no such server" from "nothing happened". Without --follow a note on stderr says the stream
// holds no event of that server (still exit 0, stdout empty: an empty history is not an error,
// as with other filters); with --follow it says so and waits. A known server whose events the
// other filters leave out (--since, --subject) prints nothing, as before, without the note.
func TestEventsServerNeverSeen(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	note := `mcpstream events: no event of server "nosuch" is in MCPSTREAM_REGISTRY`
	for _, args := range [][]string{
		{"events", "--server", "nosuch"},
		{"events", "--server", "nosuch", "--json"},
		{"events", "--server", "nosuch", "--subject", "registry.*.status", "--since", "1h"},
	} {
		out, errOut, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		if err != nil || out != "" {
			t.Errorf("%v: stdout %q, %v; want nothing and exit 0\n%s", args, out, err, errOut)
		}
		if !strings.Contains(errOut, note) || !strings.Contains(errOut, "mcpstream servers") {
			t.Errorf("%v: stderr %q; want the note %q", args, errOut, note)
		}
	}
	// A control character of the name is not printed as such.
	if _, errOut, err := runCmd(t, ctx, "events", "--server", "evil\x1b[2J", "--nats", env.URL); err != nil || strings.Contains(errOut, "\x1b") || !strings.Contains(errOut, "no event of server") {
		t.Errorf("--server with an escape: %q, %v", errOut, err)
	}
	for _, args := range [][]string{
		{"events", "--server", "kb", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		{"events", "--server", "kb", "--subject", "registry.*.revoked"},
	} {
		out, errOut, err := runCmd(t, ctx, append(args, "--nats", env.URL)...)
		if err != nil || out != "" || errOut != "" {
			t.Errorf("%v: stdout %q, stderr %q, %v; want nothing at all", args, out, errOut, err)
		}
	}
	if out, errOut, err := runCmd(t, ctx, "events", "--server", "kb", "--nats", env.URL); err != nil || !strings.Contains(out, "kb status unavailable") || errOut != "" {
		t.Errorf("--server kb: stdout %q, stderr %q, %v", out, errOut, err)
	}

	// --follow: the note at once, then the server's events when they come.
	fctx, fcancel := context.WithCancel(context.Background())
	defer fcancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(fctx, []string{"events", "--follow", "--server", "newcomer", "--nats", env.URL}, &out, &errOut)
	}()
	waitFor(t, "the note of --follow", 200, func() bool {
		return strings.Contains(errOut.String(), `mcpstream events: no event of server "newcomer" is in MCPSTREAM_REGISTRY yet`)
	})
	publish(t, env.JS, subjects.RegistryStatus("newcomer"), status("newcomer", subjects.StatusReady, t0))
	waitFor(t, "the followed event", 200, func() bool { return strings.Contains(out.String(), "newcomer status ready") })
	fcancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("events --follow: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events --follow did not stop after cancel")
	}
}
