package executor

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
)

// A wait for a registry sequence that ends with its context (a re-list reply naming a
// sequence the stream never reaches, or that arrives too late) leaves nothing behind: the
// waiters would otherwise grow by one per call that waited in vain.
func TestWaitAppliedForgetsGivenUpWaiters(t *testing.T) {
	r := newRegistry(zerolog.Nop())
	r.advance(10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const n = 1000
	for i := range n {
		if err := r.waitApplied(ctx, 1<<40+uint64(i%10)); err == nil {
			t.Fatal("waitApplied of a sequence never applied returned nil")
		}
	}
	r.mu.Lock()
	waiting := 0
	for _, ws := range r.waiters {
		waiting += len(ws)
	}
	keys := len(r.waiters)
	r.mu.Unlock()
	if waiting != 0 || keys != 0 {
		t.Fatalf("after %d given-up waits the registry holds %d waiters under %d sequences, want none", n, waiting, keys)
	}
	// A wait that is not given up is still woken.
	done := make(chan error, 1)
	go func() { done <- r.waitApplied(context.Background(), 11) }()
	waitFor(t, "the wait for 11 registered", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.waiters[11]) == 1
	})
	r.advance(11)
	if err := <-done; err != nil {
		t.Fatalf("waitApplied(11): %v", err)
	}
}
