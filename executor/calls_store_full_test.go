package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallRefusedWhileStoreFull: JetStream out of storage (max_file_store reached). A new call
// is refused unavailable, through the front end and straight on the calls stream alike, with a
// message that says the storage is full (it said only NATS's "insufficient resources"), and
// nothing runs.
func TestCallRefusedWhileStoreFull(t *testing.T) {
	t.Parallel()
	n := &counter{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, nats: natsembed.Config{MaxStore: 4 << 20}, exec: Config{Dispatcher: bigResults{n: n, size: 10}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	junk := []byte(strings.Repeat("j", 64<<10))
	for i := 0; ; i++ {
		if _, err := r.env.JS.Publish(ctx, "mcpstream.v1.audit.junk.fill", junk); err != nil {
			if !subjects.OutOfStorage(err) {
				t.Fatalf("filling the store: %v", err)
			}
			break
		}
		if i > 1000 {
			t.Fatal("the store never filled")
		}
	}
	for _, direct := range []bool{false, true} {
		req := subjects.CallRequest{Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"a"}`)}
		call := r.client.Call
		if direct {
			call = r.client.CallDirect
		}
		res, err := call(ctx, "local", req)
		if err != nil {
			t.Fatalf("direct=%v: %v", direct, err)
		}
		if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable ||
			!strings.Contains(res.Error.Message, "storage is full") {
			t.Errorf("direct=%v: got %s %+v, want refused unavailable saying the storage is full", direct, res.Status, res.Error)
		}
	}
	if got := n.get("echo"); got != 0 {
		t.Errorf("dispatched %d times, want never", got)
	}
}

// TestCallRefusedWhileStoreFailed: the calls stream's store failed a write (a full disk: no
// space left on device). JetStream then answers no publish on it, no PubAck and no error, and
// stores nothing more: the front end waited for a PubAck, answered its outcome unknown
// (timeout), and Call, which had published the request again itself meanwhile, passed that
// over and waited until its deadline. The front end asks Config.StreamWriteError when a
// publish gets no PubAck, and refuses the call unavailable saying why.
func TestCallRefusedWhileStoreFailed(t *testing.T) {
	t.Parallel()
	n := &counter{}
	var failed atomic.Bool
	var asked atomic.Int64
	werr := errors.New("JetStream stream '$G > " + subjects.CallsStream + "' write error: write 1.blk: no space left on device")
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: bigResults{n: n, size: 10},
		StreamWriteError: func(stream string) error {
			asked.Add(1)
			if stream == subjects.CallsStream && failed.Load() {
				return werr
			}
			return nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// As a stream whose store failed: publishes reach it and get no answer.
	if err := r.env.JS.DeleteStream(ctx, subjects.CallsStream); err != nil {
		t.Fatal(err)
	}
	mute, err := r.env.NC.Subscribe(subjects.Calls("local"), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Unsubscribe()
	if err := r.env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	failed.Store(true)

	res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"a"}`)})
	if err != nil {
		t.Fatalf("no answer: %v (write error asked %d times)", err, asked.Load())
	}
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable ||
		!strings.Contains(res.Error.Message, "storage is full") || !strings.Contains(res.Error.Message, "no space left on device") {
		t.Errorf("got %s %+v, want refused unavailable saying the storage is full, and why", res.Status, res.Error)
	}
	if got := n.get("echo"); got != 0 {
		t.Errorf("dispatched %d times, want never", got)
	}
}
