package registrysync

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"
)

func TestFastRouter(t *testing.T) {
	var r fastRouter
	if r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-1","result":{}}`)) {
		t.Fatal("routed with nobody waiting")
	}
	one := r.register("mcpstream-1")
	two := r.register("mcpstream-2")
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"mcpstream-1"}}`, // a notification
		`{"jsonrpc":"2.0","id":"mcpstream-1","method":"ping"}`,                               // a request from the server
		`{"jsonrpc":"2.0","id":1,"result":{"note":"mcpstream-1"}}`,                           // mcp-go's own request
		`{"jsonrpc":"2.0","id":"mcpstream-9","result":{}}`,                                   // nobody waits for it
		`{"jsonrpc":"2.0","id":"mcpstream-1","result":`,                                      // cut short
	} {
		if r.route([]byte(line)) {
			t.Errorf("routed %s", line)
		}
	}
	buf := []byte(`{"result":{"content":[{"type":"text","text":"ok"}]},"jsonrpc":"2.0","id":"mcpstream-1"}`)
	if !r.route(buf) {
		t.Fatal("the answer to mcpstream-1 was not routed")
	}
	copy(buf, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX") // the reader reuses its buffer
	if got := <-one; string(got.result) != `{"content":[{"type":"text","text":"ok"}]}` || got.rpcErr != nil {
		t.Errorf("got %s %+v", got.result, got.rpcErr)
	}
	if r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-1","result":{}}`)) {
		t.Error("a second answer to mcpstream-1 was routed")
	}
	if !r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-2","error":{"code":-32602,"message":"bad"}}`)) {
		t.Fatal("the error answer to mcpstream-2 was not routed")
	}
	if got := <-two; got.rpcErr == nil || got.rpcErr.Code != -32602 || got.result != nil {
		t.Errorf("got %s %+v", got.result, got.rpcErr)
	}
	r.register("mcpstream-3")
	r.forget("mcpstream-3")
	if r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-3","result":{}}`)) || r.n.Load() != 0 {
		t.Error("routed after forget")
	}
}

// TestFastCallAnswerBeatsCancel: an answer that is in when the call's context ends at the same
// moment is the call's outcome. fastCall picked at random between the two: half the time it
// dropped the result, reported the call timed out ("may have run") and sent
// notifications/cancelled for a request the server had completed.
func TestFastCallAnswerBeatsCancel(t *testing.T) {
	for i := range 20 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		// A full pipe: the call's frame waits until the answer is in and its context ended.
		junk := bytes.Repeat([]byte(" "), 64<<10)
		_ = w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		full := 0
		for {
			n, err := w.Write(junk)
			full += n
			if err != nil {
				break
			}
		}
		_ = w.SetWriteDeadline(time.Time{})
		lost := make(chan struct{})
		s := &session{stdio: &stdioWrap{}, lost: lost,
			child: &child{in: newFrameWriter(w), readerDone: make(chan struct{})}}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan callResult, 1)
		go func() { r, _ := s.fastCall(ctx, "t", nil); got <- r }()
		// The frame is being written (frameWriter holds stdin) before the answer comes and the
		// context ends: a call whose frame was never written has nothing to be answered, and
		// WriteCtx rightly gives up on a context that ended before it took stdin.
		waitUntil(t, "the call's frame is being written", func() bool {
			return s.child.fast.n.Load() == 1 && len(s.child.in.sem) == 1
		})
		if !s.child.fast.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-1","result":{"content":[]}}`)) {
			t.Fatal("the answer was not routed")
		}
		cancel()
		sent, err := io.ReadAll(io.LimitReader(r, int64(full)))
		if err != nil || len(sent) != full {
			t.Fatal(err)
		}
		res := <-got
		_ = w.Close()
		rest, _ := io.ReadAll(r)
		_ = r.Close()
		if res.raw == nil || bytes.Contains(rest, []byte("notifications/cancelled")) {
			t.Fatalf("try %d: %+v, sent %s; want the answer and no cancellation", i, res, rest)
		}
	}
}

// TestFrameWriterEndedContextWritesNothing: a call whose context ended before its frame was
// written is not written, even with stdin free. The old select chose at random between taking
// the free lock and the ended context, and wrote about half such frames: a tools/call its
// caller had given up on (answered timeout) would still run.
func TestFrameWriterEndedContextWritesNothing(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fw := newFrameWriter(w)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		if n, err := fw.WriteCtx(ctx, []byte("{}\n")); n != 0 || err == nil {
			t.Fatalf("write %d with an ended context: %d bytes, err %v", i, n, err)
		}
	}
	if n, err := fw.WriteCtx(context.Background(), []byte("{}\n")); n != 3 || err != nil {
		t.Fatalf("write with a live context: %d bytes, err %v", n, err)
	}
}
