//go:build unix

package registrysync

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// stubbornScript is a stdio server that outlives its stdin and SIGTERM: a shell that ignores
// SIGTERM (its children inherit that), starts a grandchild, serves MCP through the test binary
// ($2, the fixture) and then waits for the grandchild. It records "child PID" and
// "grandchild PID" in the file $1.
const stubbornScript = `trap '' TERM
echo "child $$" >> "$1"
sleep 100000 &
echo "grandchild $!" >> "$1"
"$2" -test.run='^$'
wait`

// processAlive reports whether pid runs: it exists and is not a zombie (a reparented process
// init has not reaped yet).
func processAlive(pid int) bool {
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

// KillChildren SIGKILLs every stdio child's process group, a child and what it started, though
// the child ignores SIGTERM and outlives its stdin; a child the connector starts after it (the
// reconnection) is killed at once. It is what a process quitting without a clean stop (a second
// Ctrl-C) calls: nothing else reaches children in their own process groups.
func TestKillChildrenKillsGroups(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	sc := stdioServer(t, "stubborn", "fixture")
	sc.Args = []string{"-c", stubbornScript, "sh", pidFile, sc.Command}
	sc.Command = "/bin/sh"
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("stubborn"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	pids := func() (children, all []int) {
		data, _ := os.ReadFile(pidFile)
		for _, line := range strings.Split(string(data), "\n") {
			if name, n, ok := strings.Cut(line, " "); ok {
				if pid, err := strconv.Atoi(n); err == nil {
					all = append(all, pid)
					if name == "child" {
						children = append(children, pid)
					}
				}
			}
		}
		return children, all
	}
	t.Cleanup(func() {
		_, all := pids()
		for _, pid := range all { // what a failure left behind
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	first, all := pids()
	if len(first) != 1 || len(all) != 2 {
		t.Fatalf("pids recorded: %v", all)
	}

	h.m.KillChildren()
	waitUntil(t, "the child and its grandchild gone", func() bool {
		return !processAlive(all[0]) && !processAlive(all[1])
	})
	// The connector reconnects: its new child is killed as it starts. (Whether the shell got to
	// record its pid before the SIGKILL is chance: the count of children killed at start says
	// it happened; whatever did record its pid is gone.)
	waitUntil(t, "a new child started and killed", func() bool {
		h.m.childMu.Lock()
		n := h.m.killedAtStart
		h.m.childMu.Unlock()
		if n == 0 {
			return false
		}
		_, all := pids()
		for _, pid := range all {
			if processAlive(pid) {
				return false
			}
		}
		return true
	})
}
