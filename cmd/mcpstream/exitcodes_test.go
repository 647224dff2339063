package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestUsageErrorsExit2: a command line that is wrong in itself — a missing, extra or unknown
// argument, a flag's value out of its range — exits with status 2, as a bad flag does, and is
// found before anything is connected to or created. Several exited 1 (`demo-server` with no
// name, `events extra`, the roles' `--log-level bogus`, ...), one only once the server refused
// it (`search --k 500`), and bare `mcpstream` printed the usage on stdout and exited 0. The
// binary itself is run (the test binary acting as mcpstream), so main's exit status is what is
// checked; NATS is a port nothing listens on, so a case that wrongly goes on fails with 1.
func TestUsageErrorsExit2(t *testing.T) {
	tests := []struct {
		args   []string
		want   int
		stderr string // in stderr
	}{
		{nil, 2, "Usage: mcpstream COMMAND"},
		{[]string{"help"}, 0, ""},
		{[]string{"nosuchcommand"}, 2, `unknown command "nosuchcommand"`},
		{[]string{"help", "nosuchcommand"}, 2, `unknown command "nosuchcommand"`},
		{[]string{"version", "extra"}, 2, "extra"},
		{[]string{"demo-server"}, 2, "want one server name"},
		{[]string{"demo-server", "kb", "extra"}, 2, "want one server name"},
		{[]string{"demo-server", "nosuch"}, 2, `unknown server "nosuch"`},
		{[]string{"events", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"events", "--stream", "bogus"}, 2, "--stream"},
		{[]string{"events", "--since", "garbage"}, 2, "--since"},
		{[]string{"events", "--subject", "registry.kb"}, 2, "matches no"},
		{[]string{"servers", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"search", "q", "--k", "500"}, 2, "--k 500"},
		{[]string{"search", "q", "--k", "-1"}, 2, "--k -1"},
		{[]string{"search", "q", "--detail", "bogus"}, 2, "--detail"},
		{[]string{"eval", "retrieval", "--tools", "t.jsonl", "--queries", "q.jsonl", "--k", "500"}, 2, "--k 500"},
		{[]string{"up", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"registrysync", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"indexer", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"executor", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"up", "--log-level", "bogus"}, 2, "--log-level"},
		{[]string{"executor", "--log-format", "bogus"}, 2, "--log-format"},
		{[]string{"indexer", "--stop-timeout", "-1s"}, 2, "--stop-timeout"},
		{[]string{"registrysync", "--stream-replicas", "-1"}, 2, "--stream-replicas"},
		{[]string{"up", "--stream-replicas", "3"}, 2, "--stream-replicas"},
		{[]string{"registrysync", "--data", ""}, 2, "--data"},
		{[]string{"indexer", "--replica", "../x"}, 2, "--replica"},
		{[]string{"indexer", "--memory-limit", "bogus"}, 2, "--memory-limit"},
		{[]string{"executor", "--workers", "0"}, 2, "--workers"},
		{[]string{"executor", "--max-approval-waits", "-1"}, 2, "--max-approval-waits"},
		// The NATS flags of the role commands are read before anything is created (the indexer
		// opened, and created, its catalog before an http:// --nats was refused, exit status 1).
		{[]string{"indexer", "--nats", "http://127.0.0.1:1"}, 2, "not a NATS URL"},
		{[]string{"registrysync", "--nats", "nats://127.0.0.1:1,https://127.0.0.1:2"}, 2, "not a NATS URL"},
		{[]string{"up", "--nats", "http://127.0.0.1:1"}, 2, "not a NATS URL"},
		{[]string{"executor", "--nats-inbox", "_INBOX.>"}, 2, "--nats-inbox"},
		{[]string{"indexer", "--nats-inbox", "bad inbox"}, 2, "--nats-inbox"},
		// A prefix whose requests could pass the server's max_control_line (it closed the
		// connection at the executor's first approval read of a long tenant's call).
		{[]string{"executor", "--nats-inbox", "_INBOX." + strings.Repeat("a", 200)}, 2, "at most 120"},
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, not a bound on speed
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, tt.args...)
			cmd.Dir = t.TempDir() // up's default ./.mcpstream, if it went on
			cmd.Env = append(os.Environ(), envTestMain+"=1", envNATS+"=nats://127.0.0.1:1")
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			got := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				got = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("mcpstream %s: exit status %d, want %d (stderr with %q)\nstdout: %.300s\nstderr: %.600s",
					strings.Join(tt.args, " "), got, tt.want, tt.stderr, stdout.String(), stderr.String())
			}
			if tt.want == 2 && stdout.Len() > 0 {
				t.Errorf("mcpstream %s: a usage error wrote to stdout: %.300s", strings.Join(tt.args, " "), stdout.String())
			}
			if entries, _ := os.ReadDir(cmd.Dir); tt.want == 2 && len(entries) > 0 {
				t.Errorf("mcpstream %s: a usage error created %s", strings.Join(tt.args, " "), entries[0].Name())
			}
		})
	}
}
