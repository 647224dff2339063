package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/executor"
)

// TestExecutorWorkersUpperBound: each executor worker keeps a pull request waiting on the calls
// consumer, which takes at most executor.MaxWorkers (its MaxWaiting, 4096) over every executor:
// a --workers above it had workers whose pulls the server refused, and --workers 1000000000
// made the process create a billion iterators (and subscriptions) before it served anything.
// It is a usage error, found before anything is created or connected to.
func TestExecutorWorkersUpperBound(t *testing.T) {
	for _, n := range []string{"4097", "1000000000"} {
		data := t.TempDir() + "/data"
		err := runCommand(context.Background(), []string{"executor", "--workers", n, "--data", data,
			"--nats", "nats://127.0.0.1:1"}, io.Discard, io.Discard)
		var usage *badUsage
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--workers "+n) || !strings.Contains(err.Error(), "4096") {
			t.Errorf("--workers %s: %v; want a usage error naming the flag and its bound", n, err)
		}
	}
	if executor.MaxWorkers != 4096 {
		t.Errorf("executor.MaxWorkers = %d", executor.MaxWorkers)
	}
}
