package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envSlowStop makes a test child register slowStopCommand: a command that takes as long to stop
// as its stdin stays open, so that a test can signal it while it stops.
const envSlowStop = "MCPSTREAM_TEST_SLOW_STOP"

const slowStopCommand = "test-slow-stop"

func init() {
	if os.Getenv(envSlowStop) != "1" {
		return
	}
	register(command{name: slowStopCommand, summary: "test only", run: func(ctx context.Context, _ []string, stdout, _ io.Writer) error {
		fmt.Fprintln(stdout, "ready")
		<-ctx.Done()
		fmt.Fprintln(stdout, "stopping")
		io.Copy(io.Discard, os.Stdin) // the stop ends when the test closes stdin
		fmt.Fprintln(stdout, "stopped")
		return nil
	}})
}

type slowStopChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
	done   chan error
}

func startSlowStop(t *testing.T) *slowStopChild {
	t.Helper()
	c := &slowStopChild{stderr: &lockedBuffer{}, lines: make(chan string, 16), done: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0], slowStopCommand)
	c.cmd.Env = append(os.Environ(), envTestMain+"=1", envSlowStop+"=1")
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- c.cmd.Wait()
	}()
	t.Cleanup(func() { c.cmd.Process.Kill(); c.stdin.Close() })
	return c
}

// await waits for the child to print want on stdout.
func (c *slowStopChild) await(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-c.lines:
		if !ok || got != want {
			t.Fatalf("child printed %q (open %v), want %q; stderr:\n%s", got, ok, want, c.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not print %q within 30s; stderr:\n%s", want, c.stderr.String())
	}
}

// awaitStderr waits for the child to write a line holding want on stderr.
func (c *slowStopChild) awaitStderr(t *testing.T, want string) {
	t.Helper()
	for i := 0; i < 3000 && !strings.Contains(c.stderr.String(), want); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(c.stderr.String(), want) {
		t.Fatalf("stderr never said %q:\n%s", want, c.stderr.String())
	}
}

func (c *slowStopChild) exit(t *testing.T) int {
	t.Helper()
	for range c.lines {
	}
	select {
	case err := <-c.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not exit within 30s; stderr:\n%s", c.stderr.String())
		return -1
	}
}

// A second Ctrl-C or SIGTERM while a command stops quits at once (status 130, said on stderr).
// Before, the stop signals stayed caught after the first: an operator's second Ctrl-C did
// nothing, and only SIGKILL ended a stop waiting for long calls or the stop timeout.
func TestSecondSignalQuitsAtOnce(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startSlowStop(t)
			c.await(t, "ready")
			c.cmd.Process.Signal(sig)
			c.await(t, "stopping")
			c.cmd.Process.Signal(sig)
			if code := c.exit(t); code != forcedExit {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", code, forcedExit, c.stderr.String())
			}
			if !strings.Contains(c.stderr.String(), "quitting at once") {
				t.Fatalf("stderr does not say why it quit:\n%s", c.stderr.String())
			}
		})
	}
}

// A second SIGHUP (a closing terminal sends it more than once) does not undo the clean stop.
func TestSecondHangupKeepsStoppingCleanly(t *testing.T) {
	c := startSlowStop(t)
	c.await(t, "ready")
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.await(t, "stopping")
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.awaitStderr(t, "still stopping cleanly")
	c.stdin.Close()
	c.await(t, "stopped")
	if code := c.exit(t); code != 0 {
		t.Fatalf("exit status %d, want 0 (a clean stop); stderr:\n%s", code, c.stderr.String())
	}
}
