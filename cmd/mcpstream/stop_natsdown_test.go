package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
)

// `mcpstream up` on an external NATS that went away, then interrupted: every role stops
// within --stop-timeout (its default, 15 s) and the exit status is 0. The executor waited for
// the drain of its calls consumer and the indexer for that of its catalog subscriptions, each
// until nats.go's flush timeout (10 s, confirmation NATS could not give): the indexer did not
// stop within what was left ("stop timeout: role indexer did not stop within 15s", exit 1).
func TestUpStopsWithNATSGone(t *testing.T) {
	env := natstest.Start(t)
	args := []string{"up", "--nats", env.URL, "--data", t.TempDir(), "--http-listen", ""}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &out, &errOut) }()
	waitFor(t, "every role serving", 600, func() bool {
		select {
		case err := <-done:
			t.Fatalf("up exited: %v\n%s", err, errOut.String())
		default:
		}
		s := errOut.String()
		return strings.Contains(s, "executor serving") && strings.Contains(s, "catalog service serving")
	})

	env.Server.Shutdown()
	waitFor(t, "the disconnection logged", 600, func() bool { return strings.Contains(errOut.String(), "nats disconnected") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("up stopped with %v\n%s", err, errOut.String())
		}
	case <-time.After(60 * time.Second): // far past --stop-timeout: up is stuck
		t.Fatalf("up still running 60s after the interrupt\n%s", errOut.String())
	}
	for _, role := range []string{"executor", "indexer", "registrysync"} {
		if !strings.Contains(errOut.String(), "role stopped process=up role="+role) && !strings.Contains(errOut.String(), `"role":"`+role+`","message":"role stopped"`) {
			t.Errorf("no \"role stopped\" for %s\n%s", role, errOut.String())
		}
	}
}
