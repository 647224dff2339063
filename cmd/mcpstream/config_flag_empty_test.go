package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestConfigFlagEmptyRefused: --config "" was taken as no --config at all: `up` ran the bundled
// demo servers, and a role the demo configuration, whose policy is the open one — an executor
// started as `mcpstream executor --config "$MCPSTREAM_CONFIG"` with the variable unset (a unit
// file's typo, say) allowed every call without a word. An empty --config is a usage error, as an
// empty --data is, found before anything is created or connected to.
func TestConfigFlagEmptyRefused(t *testing.T) {
	// NATS is a port nothing listens on: a command that wrongly goes on fails to connect.
	for _, args := range [][]string{
		{"executor", "--config", "", "--nats", "nats://127.0.0.1:1"},
		{"indexer", "--config=", "--nats", "nats://127.0.0.1:1"},
		{"registrysync", "--config", " ", "--nats", "nats://127.0.0.1:1"},
		{"up", "--config", "", "--nats", "nats://127.0.0.1:1", "--http-listen", ""},
	} {
		args = append(args, "--data", t.TempDir()+"/data")
		err := runCommand(context.Background(), args, io.Discard, io.Discard)
		var usage *badUsage
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--config") {
			t.Errorf("%q: %v; want a usage error naming --config", args, err)
		}
	}
}

// TestPolicyConfigFlagEmptyRefused: policy digest --config "" digested the open policy, and
// policy check --config "" compared the instances with each other, not with the file meant: an
// empty --config is a usage error there too (exit status 2).
func TestPolicyConfigFlagEmptyRefused(t *testing.T) {
	for _, args := range [][]string{
		{"policy", "digest", "--config", ""},
		{"policy", "check", "--config=", "--nats", "nats://127.0.0.1:1"},
	} {
		var stderr strings.Builder
		err := runCommand(context.Background(), args, io.Discard, &stderr)
		if exitStatus(err) != 2 || !strings.Contains(stderr.String()+errString(err), "--config") {
			t.Errorf("%q: %v (stderr %q); want exit status 2 naming --config", args, err, stderr.String())
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
