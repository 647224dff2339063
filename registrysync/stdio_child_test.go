package registrysync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/subjects"
)

// sessionPid is the pid of the stdio child of server's current session (0 if none).
func sessionPid(h *harness, server string) int {
	c := h.m.connector(server)
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil || c.sess.child == nil {
		return 0
	}
	return c.sess.child.Pid()
}

// TestStdioClosedStdoutDetected: a child that closes its stdout but keeps running can answer
// nothing any more, yet its session stayed ready (until a probe, if probes are on) as only the
// process's exit ended a stdio session. The end of stdout ends the session at once: the child is
// stopped and reaped, and a new one started.
func TestStdioClosedStdoutDetected(t *testing.T) {
	t.Parallel()
	sc := rogueServer(t, "closer", "closestdout")
	sc.Kinds = []string{"tools"}
	h := run(t, nil, fastConfig(sc)) // PingEvery off: no probe finds it
	rec := record(t, h.env, subjects.RegistryServer("closer"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	pid1 := sessionPid(h, "closer")
	lost := rec.wait(ready.seq, "connection lost", isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
	if !strings.Contains(lost.ev.Status.Reason, "stdout") {
		t.Errorf("reason %q does not say the server closed its stdout", lost.ev.Status.Reason)
	}
	rec.wait(lost.seq, "ready again", isStatus(subjects.StatusReady, ""))
	// The old process is gone and reaped (a zombie still answers kill 0).
	waitUntil(t, "old child reaped", func() bool {
		return errors.Is(syscall.Kill(pid1, 0), syscall.ESRCH)
	})
	if pid2 := sessionPid(h, "closer"); pid1 == 0 || pid2 == pid1 {
		t.Errorf("pids %d then %d: want a new process", pid1, pid2)
	}
}

// gone reports whether pid no longer runs: reaped, or a zombie left to init to reap.
func gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// A child that never speaks MCP, ignores SIGTERM and starts a grandchild that ignores it too
// and holds the pipes: the failed handshake stops it all (SIGKILL after the grace periods, to
// the whole process group) without waiting for the pipes' EOF, and the connector retries.
func TestStdioStubbornChildAndGrandchildKilled(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatal("no /bin/sh: the test needs a POSIX shell")
	}
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	sc := ServerConfig{Name: "stubborn", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `trap '' TERM; sleep 1000 & echo $! >"$1"; echo $$ >>"$1"; sleep 1000`, "sh", pidfile}}
	cfg := fastConfig(sc)
	cfg.ConnectTimeout = time.Second
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("stubborn"))
	e := rec.wait(0, "connect failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	t.Logf("reason: %s", e.ev.Status.Reason)
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data))[:2] { // the first attempt's
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %q", data)
		}
		pids = append(pids, n)
	}
	for _, pid := range pids {
		waitUntil(t, fmt.Sprintf("process %d gone", pid), func() bool { return gone(pid) })
	}
	// The connector goes on trying.
	waitUntil(t, "a retry", func() bool { return h.m.Statuses()["stubborn"].At.After(e.ev.Status.At) })
}

// A command that does not exist, or is not executable, is connect_failed with a reason that
// says so.
func TestStdioCommandNotRunnable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"missing":   filepath.Join(dir, "missing"),
		"notexec":   plain,
		"notonpath": "mcpstream-no-such-command",
	}
	var servers []ServerConfig
	for name, cmd := range cases {
		servers = append(servers, ServerConfig{Name: name, Transport: TransportStdio, Command: cmd})
	}
	h := run(t, nil, fastConfig(servers...))
	want := map[string]string{"missing": "no such file", "notexec": "permission denied", "notonpath": "not found"}
	for name := range cases {
		rec := record(t, h.env, subjects.RegistryServer(name))
		e := rec.wait(0, "connect failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
		t.Logf("%s: %s", name, e.ev.Status.Reason)
		if !strings.Contains(e.ev.Status.Reason, want[name]) {
			t.Errorf("%s: reason %q does not say %q", name, e.ev.Status.Reason, want[name])
		}
	}
}

// nodeCrash is what node writes on stderr when a server throws at start (an uncaught error):
// the message comes before the stack frames and the version trailer.
const nodeCrash = `/srv/index.js:3
    throw new Error("API_KEY is not set");
    ^

Error: API_KEY is not set
    at Object.<anonymous> (/srv/index.js:3:11)
    at Module._compile (node:internal/modules/cjs/loader:1256:14)
    at node:internal/main/run_main_module:23:47

Node.js v20.11.1
`

// TestStdioCrashReasonSaysWhy: a stdio server that crashes at start (most are node, started by
// npx) was reported with its last stderr line only, "Node.js v20.11.1", which says nothing of
// why. Stack frames (indented lines) and node's version trailer are passed over: the reason
// quotes the last lines that tell, so the error's message. Lines with terminal escapes and
// bytes that are not UTF-8 are quoted safely; the crash loop backs off.
func TestStdioCrashReasonSaysWhy(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatal("no /bin/sh: the test needs a POSIX shell")
	}
	t.Parallel()
	dir := t.TempDir()
	crash, escapes := filepath.Join(dir, "crash.txt"), filepath.Join(dir, "escapes.txt")
	if err := os.WriteFile(crash, []byte(nodeCrash), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(escapes, []byte("\x1b[31mfatal:\x1b[0m \x1b]0;pwned\x07bad \xff\xfe bytes \xc2\x9b2J end\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := func(name, file string) ServerConfig {
		return ServerConfig{Name: name, Transport: TransportStdio, Command: "/bin/sh",
			Args: []string{"-c", `cat "$1" >&2; exit 1`, "sh", file}}
	}
	h := run(t, nil, fastConfig(server("node", crash), server("escapes", escapes)))

	rec := record(t, h.env, subjects.RegistryServer("node"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	for _, want := range []string{"exit status 1", "Error: API_KEY is not set"} {
		if !strings.Contains(e.ev.Status.Reason, want) {
			t.Errorf("node: reason %q does not say %q", e.ev.Status.Reason, want)
		}
	}
	t.Logf("node: %q", e.ev.Status.Reason)
	if strings.Contains(e.ev.Status.Reason, "    at ") {
		t.Errorf("node: reason %q quotes stack frames", e.ev.Status.Reason)
	}
	// A crash loop backs off: later attempts wait longer (the published status changes only
	// when its code does; the Manager's current one counts the attempts).
	var last subjects.Status
	waitUntil(t, "a third attempt", func() bool {
		last = h.m.Statuses()["node"]
		return last.Attempt >= 3
	})
	if last.RetryInMs <= e.ev.Status.RetryInMs || !strings.Contains(last.Reason, "API_KEY") {
		t.Errorf("attempt %d retry in %d ms (%q) after a first retry in %d ms: want a longer wait, the same reason", last.Attempt, last.RetryInMs, last.Reason, e.ev.Status.RetryInMs)
	}

	rec = record(t, h.env, subjects.RegistryServer("escapes"))
	reason := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*")).ev.Status.Reason
	t.Logf("escapes: %q", reason)
	if !utf8.ValidString(reason) || strings.ContainsFunc(reason, unicode.IsControl) || !strings.Contains(reason, "fatal:") || !strings.Contains(reason, "end") {
		t.Errorf("escapes: reason %q: want valid UTF-8 without control characters, the line's text kept", reason)
	}
}
