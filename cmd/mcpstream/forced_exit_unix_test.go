//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
)

// stubbornServer is a stdio MCP server that outlives its stdin and SIGTERM, as a wrapper whose
// server started processes of its own may: a shell that ignores SIGTERM (its children inherit
// that), starts a grandchild, serves MCP through the demo server ($2 demo-server logging), and
// once the demo server has seen its stdin close, says so and waits for the grandchild. Every
// line goes to the file $1: "child PID", "grandchild PID", then "eof".
const stubbornServer = `trap '' TERM
echo "child $$" >> "$1"
sleep 100000 &
echo "grandchild $!" >> "$1"
"$2" demo-server logging
echo eof >> "$1"
wait`

// alive reports whether process pid runs: it exists and is not a zombie (a process whose parent
// exited is reaped by init, which may be slow to, or not, in a container).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if _, perr := os.Stat("/proc/self/stat"); perr != nil {
			return true // no /proc: kill -0 tells all
		}
		return !os.IsNotExist(err)
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// A second Ctrl-C while `mcpstream registrysync` or `up` stops kills the stdio children's
// process groups before the process quits. Before, nothing did: each child runs in its own
// process group, which the terminal's Ctrl-C does not reach, and the clean stop's SIGTERM and
// SIGKILL (2 s and 5 s after stdin closed) never came, so a server that outlives its stdin (and
// whatever it started, npx's node) was left running, orphaned.
func TestForcedExitKillsStdioChildren(t *testing.T) {
	for _, role := range []string{"registrysync", "up"} {
		t.Run(role, func(t *testing.T) { testForcedExitKillsStdioChildren(t, role, false) })
	}
}

// A process whose roles do not stop within --stop-timeout exits 1 and, as a forced exit does,
// kills the stdio children's process groups first. Before, it exited leaving them to the clean
// stop's SIGTERM and SIGKILL, which its exit cancelled: a server that outlives its stdin and
// SIGTERM ran on, orphaned.
func TestStopTimeoutKillsStdioChildren(t *testing.T) {
	for _, role := range []string{"registrysync", "up"} {
		t.Run(role, func(t *testing.T) { testForcedExitKillsStdioChildren(t, role, true) })
	}
}

// testForcedExitKillsStdioChildren stops role with a second Ctrl-C, or with stopTimeout, with one
// Ctrl-C and a --stop-timeout shorter than the stubborn server's stop.
func testForcedExitKillsStdioChildren(t *testing.T, role string, stopTimeout bool) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	// (The configuration reads "$$" as "$".)
	script := strings.ReplaceAll(stubbornServer, "$", "$$")
	cfg, err := json.Marshal(map[string]any{"servers": []map[string]any{{
		"name": "stubborn", "command": "/bin/sh", "args": []string{"-c", script, "sh", pidFile, os.Args[0]},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "mcpstream.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	timeout := "10m"
	if stopTimeout {
		// Shorter than the server's stop (SIGTERM 2 s after its stdin closed, which it ignores,
		// then SIGKILL 3 s later).
		timeout = "1s"
	}
	args := []string{role, "--config", cfgPath, "--data", filepath.Join(dir, "data"), "--http-listen", "", "--stop-timeout", timeout}
	if role == "up" {
		args = append(args, "--nats-listen", "127.0.0.1:0")
	} else {
		args = append(args, "--nats", natstest.Start(t).URL)
	}

	stderr := &lockedBuffer{}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pids := map[string]int{}
	readPids := func() string {
		data, _ := os.ReadFile(pidFile)
		for _, line := range strings.Split(string(data), "\n") {
			if name, n, ok := strings.Cut(line, " "); ok {
				if pid, err := strconv.Atoi(n); err == nil {
					pids[name] = pid
				}
			}
		}
		return string(data)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		readPids()
		for _, pid := range pids { // what a failure left behind
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	exited := func() {
		select {
		case err := <-done:
			t.Fatalf("%s exited: %v\n%s", role, err, stderr.String())
		default:
		}
	}
	waitFor(t, "the stdio server connected", 1200, func() bool {
		exited()
		return strings.Contains(stderr.String(), "connected")
	})
	if readPids(); pids["child"] == 0 || pids["grandchild"] == 0 {
		t.Fatalf("the server did not record its pids: %v\n%s", pids, stderr.String())
	}

	// First Ctrl-C: the clean stop closes the server's stdin, which it outlives.
	cmd.Process.Signal(syscall.SIGINT)
	want := 1 // the roles did not stop within --stop-timeout
	if !stopTimeout {
		waitFor(t, "the server's stdin closed", 1200, func() bool {
			exited()
			return strings.Contains(readPids(), "eof")
		})
		// Second Ctrl-C, before the stop's own SIGTERM (2 s on) and SIGKILL (5 s on).
		cmd.Process.Signal(syscall.SIGINT)
		want = forcedExit
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != want {
			t.Fatalf("exit: %v, want status %d\n%s", err, want, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60s of the second Ctrl-C\n%s", role, stderr.String())
	}
	for i := 0; alive(pids["child"]) || alive(pids["grandchild"]); i++ {
		if i == 200 {
			t.Fatalf("10s after the forced exit: server (pid %d) alive %v, its grandchild (pid %d) alive %v; stderr:\n%s",
				pids["child"], alive(pids["child"]), pids["grandchild"], alive(pids["grandchild"]), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
