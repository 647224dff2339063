package registrysync

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// runLoggedAt starts a Manager with cfg whose log, at level, goes to the returned buffer.
func runLoggedAt(t *testing.T, cfg Config, level zerolog.Level) (*harness, *logBuffer) {
	t.Helper()
	return runLoggedWith(t, cfg, level, nil)
}

// runLoggedWith is runLoggedAt, with setup (if not nil) called on the Manager before Run starts.
func runLoggedWith(t *testing.T, cfg Config, level zerolog.Level, setup func(*Manager)) (*harness, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	env := natstest.Start(t)
	h := &harness{env: env, m: New(env.JS, env.NC, cfg, zerolog.New(logs).Level(level)), done: make(chan error, 1)}
	if setup != nil {
		setup(h.m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h, logs
}

// logRecord is one zerolog line, decoded.
type logRecord struct {
	Level   string   `json:"level"`
	Server  string   `json:"server"`
	Message string   `json:"message"`
	Reason  string   `json:"reason"`
	Stderr  []string `json:"stderr"`
}

// stdioFailureWarning waits for the warning that a stdio server's connection failed or was lost
// ("connect failed", "connection lost") whose reason holds want.
func stdioFailureWarning(t *testing.T, logs *logBuffer, want string) logRecord {
	t.Helper()
	var found logRecord
	waitUntil(t, "a warning whose reason says "+want, func() bool {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r logRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.Level != "warn" ||
				r.Message != "connect failed" && r.Message != "connection lost" || !strings.Contains(r.Reason, want) {
				continue
			}
			found = r
			return true
		}
		return false
	})
	return found
}

func needSh(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatal("no /bin/sh: the test needs a POSIX shell")
	}
}

// TestStdioCrashWarnsWithStderrTail: at the default log level, a stdio server that crashed was
// logged with its exit status and the few stderr lines that tell why, stack frames passed
// over: where it failed (the frames, node's version) took a rerun at debug level, where a
// chatty server's every line is logged. The warning now carries the last lines of its stderr,
// frames included, bounded in lines and bytes (a server's long or many lines do not flood it),
// while routine lines stay at debug level.
func TestStdioCrashWarnsWithStderrTail(t *testing.T) {
	needSh(t)
	t.Parallel()
	script := `i=0; while [ $i -lt 50 ]; do echo "routine line $i"; i=$((i+1)); done >&2
printf 'huge %s\n' "$(head -c 20000 /dev/zero | tr '\0' 'x')" >&2
printf '%s' "$1" >&2; exit 3`
	sc := ServerConfig{Name: "crashtail", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", script, "sh", nodeCrash}}
	h, logs := runLoggedAt(t, fastConfig(sc), zerolog.InfoLevel)
	rec := record(t, h.env, subjects.RegistryServer("crashtail"))
	rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))

	w := stdioFailureWarning(t, logs, "exit status 3")
	if !strings.Contains(w.Reason, "Error: API_KEY is not set") {
		t.Errorf("warning reason %q does not say why", w.Reason)
	}
	tail := strings.Join(w.Stderr, "\n")
	for _, want := range []string{"Error: API_KEY is not set", "at Object.<anonymous> (/srv/index.js:3:11)", "Node.js v20.11.1"} {
		if !strings.Contains(tail, want) {
			t.Errorf("warning's stderr tail %q does not hold %q", w.Stderr, want)
		}
	}
	if len(w.Stderr) > stderrRecentLines || len(tail) > stderrRecentBytes+stderrRecentLines {
		t.Errorf("stderr tail of %d lines, %d bytes: want at most %d lines, about %d bytes", len(w.Stderr), len(tail), stderrRecentLines, stderrRecentBytes)
	}
	if strings.Contains(tail, "routine line 0") {
		t.Errorf("stderr tail holds the first of 50 routine lines: not the last lines only: %q", w.Stderr)
	}
	for _, l := range w.Stderr {
		if len(l) > 400 {
			t.Errorf("a stderr line of %d bytes in the warning: lines are cut", len(l))
		}
	}
	if strings.Contains(logs.String(), `"stdio server"`) {
		t.Error("a routine stderr line was logged above debug level")
	}
}

// TestStdioStderrSecretRedactedInWarning: a server that writes a credential of its environment
// on stderr (an error message quoting it) has it redacted in the warning's stderr tail, in its
// reason and in the published status, as everywhere else its output goes.
func TestStdioStderrSecretRedactedInWarning(t *testing.T) {
	needSh(t)
	t.Parallel()
	const secret = "tok-S3cret-77xq"
	sc := ServerConfig{Name: "leaky", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `echo "auth failed for token $MY_API_TOKEN" >&2; echo "    at check (/srv/auth.js:9:1)" >&2; exit 1`},
		Env:  map[string]string{"MY_API_TOKEN": secret}}
	h, logs := runLoggedAt(t, fastConfig(sc), zerolog.DebugLevel)
	rec := record(t, h.env, subjects.RegistryServer("leaky"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))

	w := stdioFailureWarning(t, logs, "exit status 1")
	if tail := strings.Join(w.Stderr, "\n"); !strings.Contains(tail, "auth failed for token [redacted]") || !strings.Contains(tail, "/srv/auth.js") {
		t.Errorf("warning's stderr tail %q: want the lines, the token redacted", w.Stderr)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the secret reached the log:\n%s", logs.String())
	}
	if strings.Contains(string(e.data), secret) || !strings.Contains(e.ev.Status.Reason, "[redacted]") {
		t.Errorf("published status %s: want the stderr line, the token redacted", e.data)
	}
}

// TestStdioHandshakeTimeoutSaysStderr: a stdio server that writes why it cannot work on stderr
// and runs on without answering initialize (waiting for a configuration, npx still resolving a
// package that does not exist) was reported as "initialize: context deadline exceeded", in its
// status and its warning alike, with nothing of what it wrote: its stderr was quoted only when
// the process had exited. Now the reason quotes the stderr lines that tell, and the warning
// carries the tail, whether or not the process ended.
func TestStdioHandshakeTimeoutSaysStderr(t *testing.T) {
	needSh(t)
	t.Parallel()
	sc := ServerConfig{Name: "stuck", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `echo "Error: UPSTREAM_URL is not set; waiting for it" >&2; while read -r line; do :; done`}}
	cfg := fastConfig(sc)
	cfg.ConnectTimeout = time.Second
	h, logs := runLoggedAt(t, cfg, zerolog.InfoLevel)
	rec := record(t, h.env, subjects.RegistryServer("stuck"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	if want := "(stderr: Error: UPSTREAM_URL is not set; waiting for it)"; !strings.Contains(e.ev.Status.Reason, want) {
		t.Errorf("status reason %q does not quote %q", e.ev.Status.Reason, want)
	}
	w := stdioFailureWarning(t, logs, "UPSTREAM_URL is not set")
	if fmt.Sprint(w.Stderr) != "[Error: UPSTREAM_URL is not set; waiting for it]" {
		t.Errorf("warning's stderr tail %q", w.Stderr)
	}
}
