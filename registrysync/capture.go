package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// mcp-go decodes list and call results into its own types, which drop parts of a definition
// (root-level oneOf/anyOf/$defs of an inputSchema, for one). The connector needs the bytes the
// server sent, so every transport is wrapped: the wrapper forwards SendRequest and, when the
// request's context carries a capture slot, records the raw JSON-RPC result or error there.
// The context flows from client.ListToolsByPage / CallTool down to transport.SendRequest
// unchanged (mcp-go only derives it), so the slot reaches the wrapper.
//
// mcp-go is handed an empty result for the lists (capture.rawOnly): it would decode every
// item into its own types, about 2 KB each whatever the item's size, so a page of a million
// tiny items took gigabytes before the connector could refuse it. The one use mcp-go made of
// the tools it decoded, mirroring x-mcp-header arguments into Mcp-Param-* headers on
// tools/call, is done by the connector (paramheaders.go).
//
// The mcp-go client type-asserts its transport for optional behaviour: BidirectionalInterface
// (server-to-client requests), HTTPConnection (protocol version header, HTTP-only code paths),
// SetConnectionLostHandler (SSE) and RequiresLegacyProtocol (streamable HTTP with continuous
// listening). A wrapper must implement exactly the optional interfaces its inner transport
// implements, or notifications, headers and cancellation break: hence one wrapper type per
// transport kind, checked by TestWrappersForwardOptionalInterfaces.

type captureKey struct{}

// openKey holds the capture of a legacy SSE server's opening GET, whose status and Retry-After
// mcp-go reports as error text only (see openSession).
type openKey struct{}

// requestIDKey holds the mcp.RequestId of the request an HTTP exchange carries.
type requestIDKey struct{}

// idValue is a JSON-RPC id's value without its type: a lax server answering request 7 with the
// id "7" answers request 7 (this client numbers its requests from one counter, so no other
// request has 7 for its value, whatever the type).
func idValue(id mcp.RequestId) string {
	s := id.String()
	if _, v, ok := strings.Cut(s, ":"); ok {
		return v
	}
	return s
}

// errAnotherID is the error of a request answered with the id of another one.
var errAnotherID = errors.New("the server answered with the id of another request")

// capture is the slot one request's raw answer lands in. With multi round-trip requests
// (input_required) the last answer wins, which is the one the caller sees.
type capture struct {
	mu     sync.Mutex
	sent   bool
	id     mcp.RequestId // of the last request sent
	method string        // of the last request sent
	result []byte
	rpcErr *mcp.JSONRPCErrorDetails
	err    error
	// status and retryAfter are of the HTTP answer to the POST that carried the request (0
	// when none came: stdio, a connection that failed), see cappedTransport.
	status     int
	retryAfter string
	// rawOnly: the caller takes the raw result; mcp-go decodes an empty object instead.
	rawOnly bool
	// discoverPassing: the last server/discover sent with this slot failed for a passing
	// reason (see noteDiscover); not reset by the requests after it.
	discoverPassing bool
	// pin is the protocol version ServerConfig.ProtocolVersion pins for the handshake sent with
	// this slot, and discoverBound the bound of its server/discover probe (pinnedRefusal).
	pin           string
	discoverBound time.Duration
	// discoverFailure says how the last server/discover sent with this slot failed ("" if it
	// did not), for pinnedRefusal.
	discoverFailure string
}

func withCapture(ctx context.Context) (context.Context, *capture) {
	cp := &capture{}
	return context.WithValue(ctx, captureKey{}, cp), cp
}

func (cp *capture) snapshot() (sent bool, result []byte, rpcErr *mcp.JSONRPCErrorDetails, err error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.sent, cp.result, cp.rpcErr, cp.err
}

// httpAnswered records the status of the HTTP answer to the POST carrying the request. Only the
// first final answer counts: a redirect is followed by the client, and the answers mcp-go
// POSTs to the server's requests on the request's event stream (with a context derived from
// the request's) come after it.
func (cp *capture) httpAnswered(resp *http.Response) {
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.status == 0 {
		cp.status = resp.StatusCode
		cp.retryAfter = truncate(resp.Header.Get("Retry-After"), 64)
	}
}

// httpStatus is the status of the HTTP answer to the last request sent, and its Retry-After.
func (cp *capture) httpStatus() (int, string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.status, cp.retryAfter
}

// lastMethod is the method of the last request sent with this slot ("" if none was sent).
func (cp *capture) lastMethod() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.method
}

// requestID is the JSON-RPC id of the last request sent with this slot.
func (cp *capture) requestID() mcp.RequestId {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.id
}

// base forwards the methods of transport.Interface and captures raw answers.
type base struct {
	inner transport.Interface
	// meta is the _meta of the last tools/list mcp-go sent: on 2026-07-28 the protocol version,
	// client identity and capabilities it declares on every request (fastCall reuses it).
	meta atomic.Pointer[json.RawMessage]
	// retries numbers the server/discover requests sent again (discover.go).
	retries atomic.Uint64
}

func (t *base) Start(ctx context.Context) error { return t.inner.Start(ctx) }

func (t *base) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodServerDiscover) {
		return t.discover(ctx, req) // (discover.go)
	}
	return t.send(ctx, req)
}

// send forwards one request.
func (t *base) send(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if fields, ok := req.Params.(map[string]json.RawMessage); ok && req.Method == string(mcp.MethodToolsList) {
		if m, ok := fields["_meta"]; ok && len(m) > 0 {
			m = append(json.RawMessage(nil), m...)
			t.meta.Store(&m)
		}
	}
	cp, _ := ctx.Value(captureKey{}).(*capture)
	if cp != nil && req.Method == string(mcp.MethodInitialize) {
		if err := cp.discoverWait(time.Now()); err != nil {
			return nil, err // (discover.go)
		}
		if err := cp.pinnedRefusal(); err != nil {
			return nil, err // (discover.go)
		}
	}
	if cp != nil {
		cp.mu.Lock()
		cp.sent = true
		cp.id = req.ID
		cp.method = req.Method
		cp.result, cp.rpcErr, cp.err = nil, nil, nil
		cp.status, cp.retryAfter = 0, ""
		cp.mu.Unlock()
	}
	// The event stream of an HTTP request knows its id (sseRequests.want).
	resp, err := t.inner.SendRequest(context.WithValue(ctx, requestIDKey{}, req.ID), req)
	if resp == nil && err == nil {
		// mcp-go's SSE transport returns (nil, ctx.Err()) for a request whose deadline passed
		// while its POST travelled: (nil, nil) until the context's timer fires, and its client
		// then dereferences the nil response (a panic, the process's for a call made in
		// process). It is the request's timeout.
		if err = ctx.Err(); err == nil {
			err = context.DeadlineExceeded
		}
	}
	if resp != nil {
		if lerr := localError(resp.Error); lerr != nil {
			// The connector's own answer for an answer it discarded (oversize.go).
			resp, err = nil, lerr
		}
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if resp == nil && (errors.As(err, &syn) || errors.As(err, &typ)) {
		// A JSON body mcp-go could not decode, read whole (a body cut short is
		// io.ErrUnexpectedEOF: the connection may have failed): the server answered, not with a
		// JSON-RPC response (an "error" of the wrong shape, a NaN).
		err = fmt.Errorf("%w: %v", errMalformedAnswer, innerError(err))
	}
	if resp != nil && idValue(resp.ID) != idValue(req.ID) && !(resp.ID.IsNil() && resp.Error != nil) {
		// mcp-go's streamable HTTP transport takes the answer to a POST for the request's,
		// whatever its id: a late answer to an earlier call (a gateway that mixes its
		// connections up) would be taken for this one's. (A JSON-RPC error may have a null
		// id: the server could not tell the request's.)
		resp, err = nil, errAnotherID
	}
	if cp != nil {
		cp.mu.Lock()
		cp.err = err
		if resp != nil {
			cp.result = resp.Result
			cp.rpcErr = resp.Error
		}
		rawOnly := cp.rawOnly
		cp.mu.Unlock()
		if rawOnly && resp != nil && resp.Result != nil {
			empty := *resp
			empty.Result = json.RawMessage(`{}`)
			resp = &empty
		}
	}
	return resp, err
}

func (t *base) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	return t.inner.SendNotification(ctx, n)
}

func (t *base) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.inner.SetNotificationHandler(h)
}

func (t *base) Close() error { return t.inner.Close() }

func (t *base) GetSessionId() string { return t.inner.GetSessionId() }

// stdioWrap wraps *transport.Stdio: bidirectional, not HTTP.
type stdioWrap struct {
	base
	stdio *transport.Stdio
}

func (t *stdioWrap) SetRequestHandler(h transport.RequestHandler) { t.stdio.SetRequestHandler(h) }

// httpWrap wraps *transport.StreamableHTTP: bidirectional, HTTP, may require legacy.
type httpWrap struct {
	base
	http *transport.StreamableHTTP
}

func (t *httpWrap) SetRequestHandler(h transport.RequestHandler) { t.http.SetRequestHandler(h) }
func (t *httpWrap) SetProtocolVersion(v string)                  { t.http.SetProtocolVersion(v) }
func (t *httpWrap) RequiresLegacyProtocol() bool                 { return t.http.RequiresLegacyProtocol() }

// sseWrap wraps *transport.SSE: HTTP, reports a lost stream, not bidirectional.
type sseWrap struct {
	base
	sse *transport.SSE
}

func (t *sseWrap) SetProtocolVersion(v string)            { t.sse.SetProtocolVersion(v) }
func (t *sseWrap) SetConnectionLostHandler(h func(error)) { t.sse.SetConnectionLostHandler(h) }

var (
	_ transport.BidirectionalInterface = (*stdioWrap)(nil)
	_ transport.BidirectionalInterface = (*httpWrap)(nil)
	_ transport.HTTPConnection         = (*httpWrap)(nil)
	_ transport.HTTPConnection         = (*sseWrap)(nil)
)
