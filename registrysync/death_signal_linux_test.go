package registrysync

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process killed outright (SIGKILL) cannot stop its stdio servers; the kernel does, on
// Linux, for a child that outlives its stdin and SIGTERM (the parent-death signal): the next
// start would otherwise run a second copy beside it. The parent here is the test binary in
// parentEnv mode, which starts the child through startChild as a connector does.
func TestStdioChildDiesWithKilledParent(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"="+pidFile)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })

	var child int
	for deadline := time.Now().Add(30 * time.Second); child == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the parent process started no child within 30 s")
		}
		data, _ := os.ReadFile(pidFile)
		if s := strings.TrimSpace(string(data)); strings.HasSuffix(string(data), "\n") {
			child, _ = strconv.Atoi(s)
		}
	}
	t.Cleanup(func() { _ = syscall.Kill(-child, syscall.SIGKILL) })
	if !processAlive(child) {
		t.Fatalf("child %d not running before its parent is killed", child)
	}

	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	// A hang bound, not a timing check: the kernel signals the child as the parent exits.
	for deadline := time.Now().Add(10 * time.Second); processAlive(child); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d (ignores SIGTERM and its stdin) still runs 10 s after its parent was killed", child)
		}
	}
}
