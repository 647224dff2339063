//go:build linux

package main

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// unreachableNATS is a loopback address whose connections are never accepted: a listening
// socket with a backlog of 0, its queue filled, so that the kernel drops further SYNs and a
// dial ends with a dial timeout (as with a host that drops packets), not a refusal.
func unreachableNATS(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	// Fill the accept queue (backlog 0 holds one connection; more for kernels that round the
	// backlog up), each dial bounded.
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break // the queue is full: SYNs are dropped now
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	return "nats://" + addr
}

// TestClientCommandsConnectTimeout: a client command whose connection to NATS timed out (a
// dial timeout, as to a host that drops packets) sent nothing: NATS was not reached, with
// --json the error unavailable, as when the connection is refused. approve and deny said the
// decision "may or may not have been taken" (timeout), which is for a decision sent whose
// answer did not come; search, inspect and servers said timeout (when the dial's error is a
// context.DeadlineExceeded).
func TestClientCommandsConnectTimeout(t *testing.T) {
	url := unreachableNATS(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, args := range [][]string{
		{"approve", "c-1", "--json"}, {"approve", "c-1"}, {"deny", "c-1", "--json"},
		{"search", "refund", "--json"}, {"inspect", "kb__get_document", "--json"}, {"servers", "--json"},
		{"servers", "--catalog", "--json"}, {"call", "kb__get_document", "{}", "--json"},
	} {
		// All at once: each waits for its dial to time out (5 s). (Not parallel subtests:
		// -parallel is GOMAXPROCS, 2 on a small machine.) Each twice: the dial's error is the
		// dialer's context.DeadlineExceeded or the socket's deadline, whichever fires first.
		for range 2 {
			wg.Go(func() {
				args := slices.Concat(args, []string{"--nats", url})
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				out, errOut, err := runCmd(t, ctx, args...)
				if err != nil {
					errOut += err.Error()
				}
				o := cliOutcome{status: exitStatus(err), out: out, errOut: errOut}
				if o.status != 1 || strings.Contains(o.out+o.errOut, "may or may not") {
					t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and the connection's error", args, o.status, o.out, o.errOut)
				}
				if slices.Contains(args, "--json") {
					if e := o.jsonError(); e == nil || e.Code != subjects.CodeUnavailable || !strings.Contains(e.Message, "connect to NATS") {
						t.Errorf("%v: stdout %q, want the error unavailable, the connection's", args, o.out)
					}
				} else if !strings.Contains(o.errOut, "connect to NATS") {
					t.Errorf("%v: stderr %q, want the connection's error", args, o.errOut)
				}
			})
		}
	}
}
