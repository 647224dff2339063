package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// fastIDPrefix starts the JSON-RPC ids of the tools/call requests fastCall sends: their
// responses are routed by the child's reader straight to the waiting call (fastRouter), without
// going through mcp-go's transport.
const fastIDPrefix = "mcpstream-"

// stdinStall is how long a write to a child's stdin may block before the child is deemed hung.
const stdinStall = 10 * time.Second

// frameWriter serializes whole JSON-RPC frames on a child's stdin: mcp-go writes each frame
// with one Write, and so does fastCall, so frames from both never interleave. No write blocks
// for more than stdinStall (or its context): a frame cut short breaks the stream for good and
// onBroken reports it (the session is then lost).
type frameWriter struct {
	sem      chan struct{} // the lock, 1 slot
	w        *os.File
	stall    time.Duration
	broken   error
	onBroken atomic.Pointer[func(error)] // set once the session exists, while the reader may write
}

func newFrameWriter(w *os.File) *frameWriter {
	return &frameWriter{sem: make(chan struct{}, 1), w: w, stall: stdinStall}
}

func (f *frameWriter) Write(p []byte) (int, error) { return f.WriteCtx(context.Background(), p) }

// WriteCtx writes p whole, giving up when ctx ends; n > 0 with an error means a partial frame.
func (f *frameWriter) WriteCtx(ctx context.Context, p []byte) (int, error) {
	select {
	case f.sem <- struct{}{}: // free: no timer to wait with (the common case, one per call)
	default:
		if err := f.wait(ctx); err != nil {
			return 0, err
		}
	}
	defer func() { <-f.sem }()
	// A call whose ctx ended while it waited is not written: select picks at random among
	// ready cases, and a frame written now would run a call its caller has given up on.
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if f.broken != nil {
		return 0, f.broken
	}
	limit := time.Now().Add(f.stall)
	if d, ok := ctx.Deadline(); ok && d.Before(limit) {
		_ = f.w.SetWriteDeadline(d)
	} else {
		_ = f.w.SetWriteDeadline(limit)
	}
	n, err := f.w.Write(p)
	if err != nil && (n > 0 || !time.Now().Before(limit)) {
		f.broken = fmt.Errorf("writing to the server's stdin: %w", err)
		if fn := f.onBroken.Load(); fn != nil {
			(*fn)(f.broken)
		}
	}
	return n, err
}

// wait takes the lock, giving up when ctx ends or after f.stall.
func (f *frameWriter) wait(ctx context.Context) error {
	stall := time.NewTimer(f.stall)
	defer stall.Stop()
	select {
	case f.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stall.C:
		return fmt.Errorf("stdin busy for %s", f.stall)
	}
}

func (f *frameWriter) Close() error { return f.w.Close() }

// fastResponse is the answer to one fastCall request.
type fastResponse struct {
	result   json.RawMessage
	rpcErr   *mcp.JSONRPCErrorDetails
	tooLarge bool // the answer was a line longer than maxLineBytes, dropped
	// malformed: the answer was a line that is not valid JSON (a NaN in it, say), dropped; it
	// says what is wrong with it, redacted, bounded and printable (child.brokenAnswer).
	malformed string
	batch     bool // the answer came in a JSON-RPC batch that was refused (errBadBatch)
}

// idWindow is how many bytes at each end of an over-long line are searched for its id.
const idWindow = 256

// tooLarge ends the call waiting for the answer whose head and tail (the first and last
// idWindow bytes of a line too long to take) carry its id (see oversizeID), reporting whether
// one did.
func (r *fastRouter) tooLarge(head, tail []byte) bool {
	id, ok := oversizeID(head, tail)
	return ok && r.tooLargeID(id)
}

// tooLargeID ends the call waiting for the answer with id (its JSON text), reporting whether
// one did.
func (r *fastRouter) tooLargeID(id []byte) bool {
	ch := r.takeID(id)
	if ch == nil {
		return false
	}
	ch <- fastResponse{tooLarge: true}
	return true
}

// takeID is take for id as oversizeID returns it (its JSON text: a string without escapes, or
// a number): the channel of the call waiting for exactly that id, removed, or nil if none.
func (r *fastRouter) takeID(id []byte) chan fastResponse {
	if r.n.Load() == 0 || len(id) < 2 || !bytes.HasPrefix(id, []byte(`"`+fastIDPrefix)) || id[len(id)-1] != '"' {
		return nil
	}
	return r.take(string(id[1 : len(id)-1]))
}

// fastRouter hands the responses to fastCall requests to their waiting calls.
type fastRouter struct {
	mu      sync.Mutex
	waiting map[string]chan fastResponse
	n       atomic.Int32 // len(waiting): the reader checks it without the lock
}

// register returns the channel the response to id will arrive on. Call forget when done.
func (r *fastRouter) register(id string) <-chan fastResponse {
	ch := make(chan fastResponse, 1)
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = map[string]chan fastResponse{}
	}
	r.waiting[id] = ch
	r.n.Store(int32(len(r.waiting)))
	r.mu.Unlock()
	return ch
}

// forget stops waiting for id (a no-op once its response was routed).
func (r *fastRouter) forget(id string) { r.take(id) }

// take removes and returns the channel of the call waiting for id (nil if none).
func (r *fastRouter) take(id string) chan fastResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.waiting[id]
	delete(r.waiting, id)
	r.n.Store(int32(len(r.waiting)))
	return ch
}

// route delivers msg, one line from the child, when it is the response to a waiting request; it
// reports whether it did. Anything else (requests, notifications, responses to mcp-go's own
// requests or to calls no longer waiting, lines that are not JSON) is left to the caller.
func (r *fastRouter) route(msg []byte) bool {
	if r.n.Load() == 0 || !bytes.Contains(msg, []byte(fastIDPrefix)) {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"` // a copy: msg's buffer is reused
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.Method) > 0 {
		return false
	}
	var id string
	if json.Unmarshal(m.ID, &id) != nil || !strings.HasPrefix(id, fastIDPrefix) {
		return false
	}
	ch := r.take(id)
	if ch == nil {
		return false
	}
	// The answer to a waiting call always ends it, malformed or not (mcp-go would drop a
	// malformed one, and the call would wait out its timeout).
	resp := fastResponse{result: m.Result}
	switch {
	case len(m.Error) > 0 && string(m.Error) != "null":
		resp.result = nil
		resp.rpcErr = &mcp.JSONRPCErrorDetails{}
		if json.Unmarshal(m.Error, resp.rpcErr) != nil {
			resp.rpcErr = &mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "malformed error member in the answer"}
		}
	case len(m.Result) == 0 || string(m.Result) == "null":
		resp.result = nil
		resp.rpcErr = &mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "the answer holds neither a result nor an error"}
	}
	ch <- resp
	return true
}
