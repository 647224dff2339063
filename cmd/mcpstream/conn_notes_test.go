package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// silentListener is a loopback address that accepts connections and never writes: not a NATS
// server (which greets a client at once with its INFO).
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	return ln.Addr().String()
}

// TestClientCommandsNotNATS: a client command pointed at something that accepts connections
// but is no NATS server failed after the connect timeout with only "read tcp ...: i/o
// timeout". It says the address may not be a NATS server, naming the URL without its password.
func TestClientCommandsNotNATS(t *testing.T) {
	url := "nats://bob:s3cret@" + silentListener(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, args := range [][]string{
		{"call", "kb__get_document", "{}"}, {"call", "kb__get_document", "{}", "--json"},
		{"search", "refund"}, {"search", "refund", "--json"},
		{"events"}, {"events", "--json"}, {"servers"}, {"servers", "--json"},
	} {
		// All at once: each waits for the connect timeout (5 s).
		wg.Go(func() {
			args := slices.Concat(args, []string{"--nats", url})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, errOut, err := runCmd(t, ctx, args...)
			msg := errOut
			if err != nil {
				msg += err.Error()
			}
			if slices.Contains(args, "--json") && args[0] != "events" { // (events' errors are text)
				o := cliOutcome{status: exitStatus(err), out: out, errOut: errOut}
				e := o.jsonError()
				if e == nil || e.Code != subjects.CodeUnavailable {
					t.Errorf("%v: stdout %q, want the error unavailable", args, out)
					return
				}
				msg = e.Message
			}
			if !strings.Contains(msg, "nats://bob:***@") || !strings.Contains(msg, "may not be a NATS server") || strings.Contains(out+msg, "s3cret") {
				t.Errorf("%v: %q; want it to say that nats://bob:***@... may not be a NATS server", args, msg)
			}
		})
	}
}

// TestEventsFollowNotesReconnect: events --follow through a NATS restart said nothing while
// NATS was away (it resumed once back). It notes on stderr the connection lost and back; stdout
// stays the events, one JSON object a line with --json.
func TestEventsFollowNotesReconnect(t *testing.T) {
	n := startRestartableNATS(t)
	jsAt := func() jetstream.JetStream {
		nc, err := nats.Connect(n.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	js := jsAt()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := subjects.EnsureStreams(sctx, js, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	publish(t, js, subjects.RegistryStatus("kb"), status("kb", subjects.StatusReady, t0))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"events", "--follow", "--json", "--nats", n.url}, &out, &errOut) }()
	waitFor(t, "the first event", 600, func() bool { return strings.Count(out.String(), "\n") == 1 })

	n.srv.Shutdown()
	waitFor(t, "the note of the lost connection", 600, func() bool {
		return strings.Contains(errOut.String(), "mcpstream events: lost the connection to NATS at "+n.url)
	})
	n.restart(t, false)
	waitFor(t, "the note of the reconnection", 600, func() bool {
		return strings.Contains(errOut.String(), "mcpstream events: reconnected to NATS at "+n.url)
	})
	publish(t, jsAt(), subjects.RegistryStatus("kb"), status("kb", subjects.StatusUnavailable, t0))
	waitFor(t, "the event after the restart", 600, func() bool { return strings.Count(out.String(), "\n") == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("events --follow: %v (stderr %s)", err, errOut.String())
	}
	for i, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var ev struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Seq != uint64(i+1) {
			t.Errorf("stdout line %d = %q, want event %d as JSON", i, l, i+1)
		}
	}
	if lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n"); len(lines) != 2 {
		t.Errorf("stderr = %q, want the two notes", errOut.String())
	}
}

// TestCallNotesReconnect: a call waiting for its answer through a NATS restart said nothing
// while NATS was away. It notes on stderr the connection lost and back, and still prints the
// answer stored meanwhile (stdout: that answer only).
func TestCallNotesReconnect(t *testing.T) {
	n := startRestartableNATS(t)
	nc, err := nats.Connect(n.url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := subjects.EnsureStreams(sctx, js, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	requests := make(chan struct{}, 16)
	if _, err := nc.Subscribe(subjects.ExecAll, func(*nats.Msg) { requests <- struct{}{} }); err != nil { // never answers
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang only
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"call", "kb__x", "--id", "c-1", "--principal", "acme/bob", "--json", "--wait", "1h", "--nats", n.url}, &out, &errOut)
	}()
	select {
	case <-requests:
	case <-ctx.Done():
		t.Fatal("the call's request never came")
	}
	n.srv.Shutdown()
	waitFor(t, "the note of the lost connection", 600, func() bool {
		return strings.Contains(errOut.String(), "mcpstream call: lost the connection to NATS at "+n.url)
	})
	n.restart(t, false)
	waitFor(t, "the note of the reconnection", 600, func() bool {
		return strings.Contains(errOut.String(), "mcpstream call: reconnected to NATS at "+n.url)
	})
	waitFor(t, "the test's connection back", 600, nc.IsConnected)
	res := subjects.CallResult{V: 1, ID: "c-1", Tenant: "acme", Tool: "kb__x", Status: subjects.CallOK,
		Result: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)}
	publish(t, js, subjects.Result("acme", "c-1"), res)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("call: %v (stderr %s)", err, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("the call did not end")
	}
	var got bytes.Buffer
	if err := json.Compact(&got, []byte(out.String())); err != nil || got.String() != `{"content":[{"type":"text","text":"hi"}]}` {
		t.Errorf("stdout = %q, want the answer only", out.String())
	}
}
