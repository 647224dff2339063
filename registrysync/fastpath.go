package registrysync

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
)

// fastIDPrefix starts the JSON-RPC ids of the tools/call requests fastCall sends: their
// responses are routed by the child's reader straight to the waiting call (fastRouter), without
// going through mcp-go's transport.
const fastIDPrefix = "mcpstream-"

// frameWriter serializes whole JSON-RPC frames on a child's stdin: mcp-go writes each frame
// with one Write, and so does fastCall, so frames from both never interleave.
type frameWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Write(p)
}

func (f *frameWriter) Close() error { return f.w.Close() }

// fastResponse is the answer to one fastCall request.
type fastResponse struct {
	result json.RawMessage
	rpcErr *mcp.JSONRPCErrorDetails
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
func (r *fastRouter) forget(id string) {
	r.mu.Lock()
	delete(r.waiting, id)
	r.n.Store(int32(len(r.waiting)))
	r.mu.Unlock()
}

// route delivers msg, one line from the child, when it is the response to a waiting request; it
// reports whether it did. Anything else (requests, notifications, responses to mcp-go's own
// requests or to calls no longer waiting, lines that are not JSON) is left to the caller.
func (r *fastRouter) route(msg []byte) bool {
	if r.n.Load() == 0 || !bytes.Contains(msg, []byte(fastIDPrefix)) {
		return false
	}
	var m struct {
		ID     json.RawMessage          `json:"id"`
		Method string                   `json:"method"`
		Result json.RawMessage          `json:"result"` // a copy: msg's buffer is reused
		Error  *mcp.JSONRPCErrorDetails `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method != "" {
		return false
	}
	var id string
	if json.Unmarshal(m.ID, &id) != nil || !strings.HasPrefix(id, fastIDPrefix) {
		return false
	}
	r.mu.Lock()
	ch := r.waiting[id]
	delete(r.waiting, id)
	r.n.Store(int32(len(r.waiting)))
	r.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- fastResponse{result: m.Result, rpcErr: m.Error}
	return true
}
