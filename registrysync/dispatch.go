package registrysync

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/jsonscan"
	"github.com/mcpstream/mcpstream/subjects"
)

// Service identity of the request/reply endpoints.
const (
	ServiceName    = "mcpstream-registrysync"
	ServiceVersion = "1.0.0"
	QueueGroup     = "mcpstream-registrysync"
)

// Dispatch runs tools/call on the session the server's connector holds and returns the raw
// CallToolResult (content, structuredContent and isError exactly as the server sent them), or an
// error whose code tells what the caller may assume:
//
//   - not_found, bad_request, too_large, unavailable: nothing was sent to the server, or the
//     server refused it unprocessed (an HTTP status such as 429, see refusedStatus);
//   - protocol_error: the server answered with a JSON-RPC error (its code is in the message),
//     or broke the protocol (an answer that is not valid JSON, say): the call may have run; a
//     result refused for its shape (resultShapeProblem) is in Withheld, for the audit trail;
//   - timeout: the request was sent and no answer came in time: outcome unknown;
//   - outcome_unknown: the connection failed after sending: outcome unknown.
func (m *Manager) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	c := m.connector(server)
	if c == nil {
		return dispatchErr(subjects.CodeNotFound, "no server "+server+" is configured", "")
	}
	return c.dispatch(ctx, req)
}

func dispatchErr(code, msg, reason string) subjects.DispatchReply {
	return subjects.DispatchReply{V: subjects.Version, Error: &subjects.Error{Code: code, Message: msg, Reason: reason}}
}

// notSentErr is dispatchErr for a request that never left the connector (DispatchReply.NotSent;
// its message says "nothing was sent", as older executors read it).
func notSentErr(code, msg, reason string) subjects.DispatchReply {
	r := dispatchErr(code, msg, reason)
	r.NotSent = true
	return r
}

func (c *connector) dispatch(ctx context.Context, req subjects.DispatchRequest) subjects.DispatchReply {
	if req.Tool == "" {
		return dispatchErr(subjects.CodeBadRequest, "tool is required", "")
	}
	if args := bytes.TrimSpace(req.Arguments); len(args) > 0 && !bytes.Equal(args, []byte("null")) {
		if args[0] != '{' || !json.Valid(args) {
			return dispatchErr(subjects.CodeBadRequest, "arguments must be a JSON object", "")
		}
	} else {
		req.Arguments = nil
	}
	s := c.session()
	if s == nil || s.isLost() {
		st := c.current()
		return notSentErr(subjects.CodeUnavailable, "server "+c.sc.Name+" is not connected ("+st.Status+"); nothing was sent", st.Reason)
	}
	task := c.needsTask(req.Tool)
	if task && mcp.IsModernProtocol(s.protocol) {
		// 2026-07-28 has no tasks/result: the task would run, and its result could not be had.
		return notSentErr(subjects.CodeUnavailable, "tool "+req.Tool+" requires tasks (execution.taskSupport \"required\"), "+
			"which mcpstream runs on protocol 2025-11-25 only, and server "+c.sc.Name+" speaks "+s.protocol+
			" (protocolVersion pins one); nothing was sent", "")
	}
	if !s.beginCall() {
		return notSentErr(subjects.CodeUnavailable, "server "+c.sc.Name+" is disconnecting; nothing was sent", "")
	}
	defer s.calls.Done()
	// A configured CallTimeout bounds every call: a request may ask for less (the executor
	// sends what is left of its own deadline), never for more.
	timeout := DefaultCallTimeout
	if req.TimeoutMs > 0 {
		// (capped: a timeoutMs past what a time.Duration holds would wrap negative)
		timeout = time.Duration(min(req.TimeoutMs, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
		if c.sc.CallTimeout > 0 {
			timeout = min(timeout, c.sc.CallTimeout)
		}
	} else if c.sc.CallTimeout > 0 {
		timeout = c.sc.CallTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r callResult
	if task {
		r = s.callToolTask(cctx, req.Tool, req.Arguments)
	} else {
		r = s.callTool(cctx, req.Tool, req.Arguments)
	}
	redact := c.red.String

	switch {
	case r.bad != "":
		// (the server's words in it are bounded as they are redacted: quote replaces the start
		// of a value its cut left too)
		return dispatchErr(subjects.CodeProtocolError, quote(c.red, r.bad, 512)+"; the call was sent and may have run", "")
	case r.rpcErr != nil:
		return dispatchErr(subjects.CodeProtocolError, "server answered "+rpcErrorText(r.rpcErr, redact), "")
	case len(r.raw) > 0:
		inputRequired, ok := resultTypeInputRequired(r.raw)
		if !ok {
			return dispatchErr(subjects.CodeProtocolError, "server answered a result that is not a JSON object", "")
		}
		if inputRequired {
			return dispatchErr(subjects.CodeProtocolError,
				"the tool asked for user input (input_required), which mcpstream does not provide; the call did not complete", "")
		}
		// mcp-go may have failed to decode it (an unknown content type, say): the raw result
		// is still the server's answer — without the host's secrets in it.
		res, changed := c.red.JSON(r.raw)
		if changed {
			c.log.Warn().Str("tool", req.Tool).Msg("a tool result held a configured secret value: redacted")
		}
		if bad := resultShapeProblem(r.raw); bad != "" {
			// Not the call's result; the server's answer all the same, for the audit trail
			// (DispatchReply.Withheld): what the server answered is what an audit is for.
			rep := dispatchErr(subjects.CodeProtocolError, "server answered a result whose "+bad+"; the call ran", "")
			rep.Withheld = res
			return rep
		}
		return subjects.DispatchReply{V: subjects.Version, Result: res}
	case r.refused != nil:
		e := *r.refused
		e.Message += ": " + quote(c.red, errText(r.err), 512)
		return subjects.DispatchReply{V: subjects.Version, Error: &e}
	case !r.sent:
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return notSentErr(subjects.CodeUnavailable, "the deadline passed before the call was sent; nothing was sent", "")
		}
		// (as every error text below, quoted: mcp-go's may hold an HTTP error's body whole, of
		// megabytes, which the reply could not carry)
		return notSentErr(subjects.CodeUnavailable, "the call could not be sent (nothing was sent): "+quote(c.red, errText(r.err), 512), "")
	case errors.Is(r.err, errResponseTooLarge):
		return dispatchErr(subjects.CodeResultTooLarge, "the server's answer is larger than an event can hold; the call ran: "+quote(c.red, errText(r.err), 512), "")
	case errors.Is(r.err, errBadBatch):
		return dispatchErr(subjects.CodeProtocolError, errBadBatch.Error()+"; the call was sent and may have run", "")
	case errors.Is(r.err, errMalformedAnswer):
		// (as a stdio answer that is not valid JSON, or whose error has the wrong shape)
		return dispatchErr(subjects.CodeProtocolError, quote(c.red, errText(r.err), 512)+"; the call was sent and may have run", "")
	case errors.Is(r.err, errAnotherID):
		return dispatchErr(subjects.CodeOutcomeUnknown, "the server answered with the id of another request; the call was sent and may have run", "")
	case errors.Is(cctx.Err(), context.DeadlineExceeded) || pastDeadline(cctx):
		return dispatchErr(subjects.CodeTimeout,
			fmt.Sprintf("no answer within %s; the call was sent and may have run", timeout), "")
	case errors.Is(r.err, errTaskHeldPastDeadline):
		// A task whose server said not to ask about it before the deadline: the timeout it
		// would end with then, now, with the server's wait.
		rep := dispatchErr(subjects.CodeTimeout, fmt.Sprintf("no answer within %s (%s); the task was cancelled; the call was sent and may have run",
			timeout, quote(c.red, r.err.Error(), 512)), "")
		rep.Error.RetryAfterMs = r.retryAfterMs
		return rep
	default:
		rep := dispatchErr(subjects.CodeOutcomeUnknown,
			"the connection failed after the call was sent; it may have run: "+quote(c.red, errText(r.err), 512), "")
		// A 503's Retry-After (unavailableRetryAfter): the executor retries a read-only tool's
		// unknown outcome, not before it.
		rep.Error.RetryAfterMs = r.retryAfterMs
		return rep
	}
}

// resultTypeInputRequired reports whether raw, the result of a tools/call (valid JSON: every
// result comes out of a decoded answer, see callTool and fastCall), says resultType
// "input_required", as encoding/json reads it into a string field, and ok false when that
// decoding fails: when raw is not an object, or a member that encoding/json takes for
// resultType (its name in any case, escapes decoded) is neither a string nor null. Of several
// such members the last string wins (null leaves the value be). One pass over raw's top-level
// members, nothing decoded but that member: decoding raw whole only to read it cost as much
// as the rest of the dispatch (BenchmarkResultType).
func resultTypeInputRequired(raw []byte) (inputRequired, ok bool) {
	const name = "resultType"
	bad := false
	scanned := jsonscan.Members(raw, func(rawName, value []byte) {
		if bad || !isMemberName(rawName, name) {
			return
		}
		switch value[0] {
		case 'n': // null: encoding/json leaves the field as it is
		case '"':
			if bytes.IndexByte(value, '\\') < 0 {
				inputRequired = string(value[1:len(value)-1]) == "input_required"
				return
			}
			var s string
			if json.Unmarshal(value, &s) != nil { // (valid JSON: not expected)
				bad = true
			}
			inputRequired = s == "input_required"
		default: // a number, a bool, an object or an array: an UnmarshalTypeError
			bad = true
		}
	})
	if !scanned || bad {
		return false, false
	}
	return inputRequired, true
}

// resultShapeProblem says what is wrong with the members of raw, a tools/call result (a JSON
// object), that say what the call did ("" if nothing): an isError that is not a boolean (or
// null), a content that is not an array (or null) of objects. As encoding/json reads them
// (names in any case), which is how the executor tells a tool's failure: it took a result whose
// isError was "true" (a decode error) for a success, and the caller got it as one. A content
// item of a type this version does not know is passed on (a later protocol's), as is a result
// without content (mcp-go servers write a structured-only one with "content": null). Of
// several content members, the last one's items count (encoding/json keeps them).
func resultShapeProblem(raw []byte) string {
	problem, items := "", ""
	jsonscan.Members(raw, func(rawName, value []byte) {
		switch {
		case problem != "":
		case isMemberName(rawName, "isError"):
			if v := string(value); v != "true" && v != "false" && v != "null" {
				problem = "isError is not a boolean: whether the tool failed cannot be told"
			}
		case isMemberName(rawName, "content"):
			items = ""
			switch value[0] {
			case 'n':
			case '[':
				jsonscan.Elements(value, func(item []byte) {
					if items == "" && item[0] != '{' {
						items = "content holds an item that is not an object"
					}
				})
			default:
				problem = "content is not an array"
			}
		}
	})
	return cmp.Or(problem, items)
}

// isMemberName reports whether rawName, a member name as it is written (quoted), is one that
// encoding/json matches to a struct field named name: name in any case, once its escapes are
// decoded. (name is ASCII without the letter i: for İ and ı, encoding/json and
// strings.EqualFold disagree; on every other letter they agree.)
func isMemberName(rawName []byte, name string) bool {
	for _, c := range rawName {
		if c == '\\' || c >= utf8.RuneSelf {
			n, ok := jsonscan.Name(rawName)
			return ok && strings.EqualFold(n, name)
		}
	}
	return len(rawName) == len(name)+2 && bytes.EqualFold(rawName[1:len(rawName)-1], []byte(name))
}

// maxServerErrorBytes caps the message of a server's JSON-RPC error that registrysync passes on
// (dispatch replies, so call results and audit events; list failures; logs): a hostile server
// can send megabytes of it.
const maxServerErrorBytes = 1 << 10

// serverErrorReadBytes bounds how much of a server's JSON-RPC error message is redacted: redact
// searches text decoded several ways, an offset (8 bytes) a decoded byte each, tens of bytes of
// memory a byte of a message of megabytes. Its start only is passed on (maxServerErrorBytes).
const serverErrorReadBytes = 64 * maxServerErrorBytes

// rpcErrorText is a server's JSON-RPC error, its message redacted by redact (a redactor's
// String), then cut (a secret cut in two would not be found). A message longer than
// serverErrorReadBytes is cut first, the mark of the cut after it: String replaces the start of
// a value that straddled it.
func rpcErrorText(e *mcp.JSONRPCErrorDetails, redact func(string) string) string {
	return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, truncate(redact(truncate(e.Message, serverErrorReadBytes)), maxServerErrorBytes))
}

func errText(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}

// beginCall registers a call unless the session is closing.
func (s *session) beginCall() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.calls.Add(1)
	return true
}

// startService adds the micro service (queue group mcpstream-registrysync), for $SRV
// discovery. The relist and dispatch endpoints are per server (serveServer): several
// registrysync processes, each with its own servers, share one NATS, and a request must reach
// the one that runs its server (a wildcard subscription in one queue group sent it to any).
func (m *Manager) startService() (micro.Service, error) {
	svc, err := micro.AddService(m.nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "mcpstream registrysync: re-list MCP servers and run tools/call on their sessions",
		QueueGroup:  QueueGroup,
	})
	if err != nil {
		return nil, fmt.Errorf("registrysync service: %w", err)
	}
	return svc, nil
}

// serveServer starts the relist and dispatch endpoints of one server, once per server name:
// queue subscriptions in the service's queue group (see msgRequest), so that Remove can end
// them (endpoints left behind would answer not_found for part of the requests once another
// process runs the server). The caller holds m.mu.
func (m *Manager) serveServer(name string) error {
	if m.served[name] != nil {
		return nil
	}
	var subs []*nats.Subscription
	for _, ep := range []struct {
		subject string
		handle  func(micro.Request)
	}{{subjects.Relist(name), m.handleRelist}, {subjects.Dispatch(name), m.handleDispatch}} {
		handle := ep.handle
		sub, err := m.nc.QueueSubscribe(ep.subject, QueueGroup, func(msg *nats.Msg) { handle(msgRequest{msg}) })
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return fmt.Errorf("endpoint %s of %q: %w", ep.subject, name, err)
		}
		subs = append(subs, sub)
	}
	m.served[name] = subs
	return nil
}

// unserveServer ends the endpoints of one server: messages already delivered are handled. The
// caller holds m.mu.
func (m *Manager) unserveServer(name string) {
	for _, sub := range m.served[name] {
		end := sub.Drain
		if !m.nc.IsConnected() {
			// A drain begun while the connection is away sends no UNSUB (nats.go leaves that
			// to the reconnection) and keeps the subscription until the reconnection has
			// subscribed it again: the server would keep a queue member that answers nothing.
			// Unsubscribed at once, it is not subscribed again.
			end = sub.Unsubscribe
		}
		if err := end(); err != nil {
			m.log.Warn().Err(err).Str("server", name).Msg("end endpoints")
		}
	}
	delete(m.served, name)
}

// fits reports whether data fits in a reply message (with room for headers).
func (m *Manager) fits(data []byte) bool {
	max := m.nc.MaxPayload()
	return max <= 0 || int64(len(data)) <= max-headerRoom
}

// respond sends data, or a too_large error if it does not fit in a message.
func (m *Manager) respond(req micro.Request, data []byte) {
	if !m.fits(data) {
		data, _ = encodeJSON(subjects.DispatchReply{V: subjects.Version, Error: &subjects.Error{
			Code:    subjects.CodeResultTooLarge,
			Message: "the answer is " + strconv.Itoa(len(data)) + " bytes, more than a NATS message holds; the call ran",
		}})
	}
	// Published directly rather than with req.Respond: handlers answer from their own
	// goroutines, and req.Respond records a failure in the request, which micro reads once
	// Handle has returned (a data race).
	if !subjects.Answerable(req.Reply()) { // (see handleDispatch)
		return
	}
	if err := m.nc.Publish(req.Reply(), data); err != nil {
		m.log.Warn().Err(err).Str("subject", req.Subject()).Msg("cannot respond")
	}
}

func (m *Manager) respondJSON(req micro.Request, v any) {
	data, err := encodeJSON(v)
	if err != nil {
		data = []byte(`{"v":1,"error":{"code":"internal","message":"cannot encode the answer"}}`)
	}
	m.respond(req, data)
}

// handle runs fn for a request on its own goroutine (a slow tools/call must not hold up the
// subscription), recovering from panics with the answer panicked gives.
func (m *Manager) handle(req micro.Request, panicked *subjects.Error, fn func()) {
	m.handlers.Add(1)
	go func() {
		defer m.handlers.Done()
		defer func() {
			if r := recover(); r != nil {
				// A panic value may quote what the server sent: redacted with its secrets.
				what := fmt.Sprint(r)
				if server, err := subjects.LastToken(req.Subject()); err == nil {
					if c := m.connector(server); c != nil {
						what = c.red.String(what)
					}
				}
				m.log.Error().Str("panic", what).Str("stack", string(debug.Stack())).Str("subject", req.Subject()).Msg("handler panicked")
				m.respondJSON(req, subjects.DispatchReply{V: subjects.Version, Error: panicked})
			}
		}()
		fn()
	}()
}

func (m *Manager) handleRelist(req micro.Request) {
	if req.Reply() != "" && !subjects.Answerable(req.Reply()) {
		// Not served, as a dispatch is not (see handleDispatch): respond would drop the answer,
		// but the re-list itself, and what it publishes, would still run for such a sender.
		m.log.Warn().Str("subject", req.Subject()).Str("reply", truncate(req.Reply(), 200)).Msg("relist request dropped: its reply subject is not an inbox but one of mcpstream's or the NATS server's own subjects")
		return
	}
	server, err := subjects.LastToken(req.Subject())
	if err != nil {
		m.respondJSON(req, subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
			Code: subjects.CodeBadRequest, Message: "bad server token in subject"}})
		return
	}
	var r subjects.RelistRequest
	if data := bytes.TrimSpace(req.Data()); len(data) > 0 {
		if err := subjects.Decode(data, &r); err != nil {
			m.respondJSON(req, subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
				Code: subjects.CodeBadRequest, Message: "malformed RelistRequest: " + truncate(err.Error(), 200)}})
			return
		}
	}
	if r.V != 0 && r.V != subjects.Version { // no "v" is version 1
		m.respondJSON(req, subjects.RelistReply{V: subjects.Version, Error: &subjects.Error{
			Code: subjects.CodeBadRequest, Message: fmt.Sprintf("unsupported version %d (want %d)", r.V, subjects.Version)}})
		return
	}
	m.handle(req, &subjects.Error{Code: subjects.CodeInternal, Message: "internal error"}, func() {
		m.respondJSON(req, m.Relist(context.Background(), server, r))
		if r.Kind == probeKind {
			m.claim(server, req.Headers().Get(probeFromHeader))
		}
	})
}

func (m *Manager) handleDispatch(req micro.Request) {
	if !subjects.Answerable(req.Reply()) {
		// The answer, and so whether the call ran, could reach nobody: not run. (Only the
		// executor dispatches, always as a request to an inbox.) Nor is an answer written
		// where a reply subject points into mcpstream's own subjects or the server's "$"
		// ones (see subjects.Answerable): this process would write there with its own
		// permissions.
		m.log.Warn().Str("subject", req.Subject()).Str("reply", truncate(req.Reply(), 200)).Msg("dispatch without a reply subject to answer ignored: nothing was run")
		return
	}
	server, err := subjects.LastToken(req.Subject())
	if err != nil {
		m.respondJSON(req, dispatchErr(subjects.CodeBadRequest, "bad server token in subject", ""))
		return
	}
	var r subjects.DispatchRequest
	if err := subjects.Decode(req.Data(), &r); err != nil {
		m.respondJSON(req, dispatchErr(subjects.CodeBadRequest, "malformed DispatchRequest: "+truncate(err.Error(), 200), ""))
		return
	}
	if r.V != 0 && r.V != subjects.Version { // no "v" is version 1; another is not run
		m.respondJSON(req, notSentErr(subjects.CodeBadRequest, fmt.Sprintf("unsupported version %d (want %d); nothing was sent", r.V, subjects.Version), ""))
		return
	}
	select {
	case m.calls <- struct{}{}:
	default:
		m.respondJSON(req, notSentErr(subjects.CodeUnavailable,
			"too many calls in flight in this registrysync; nothing was sent", ""))
		return
	}
	// A panic may come after tools/call was sent: the call may have run.
	panicked := &subjects.Error{Code: subjects.CodeOutcomeUnknown,
		Message: "the connector failed while handling the call (internal error); it may have run"}
	m.handle(req, panicked, func() {
		defer func() { <-m.calls }()
		if hook := m.beforeDispatch.Load(); hook != nil {
			(*hook)(server)
		}
		rep := m.Dispatch(context.Background(), server, r)
		data := encodeDispatchReply(rep)
		if len(rep.Withheld) > 0 && !m.fits(data) {
			// The withheld result is for the audit trail only: the answer goes without it,
			// not refused result_too_large in its place.
			rep.Withheld = nil
			data = encodeDispatchReply(rep)
		}
		m.respond(req, data)
	})
}

// encodeDispatchReply writes a successful reply around the raw result bytes untouched.
func encodeDispatchReply(r subjects.DispatchReply) []byte {
	if r.Error == nil && len(r.Result) > 0 && json.Valid(r.Result) {
		var b bytes.Buffer
		b.Grow(len(r.Result) + 24)
		b.WriteString(`{"v":` + strconv.Itoa(r.V) + `,"result":`)
		b.Write(r.Result)
		b.WriteByte('}')
		return b.Bytes()
	}
	data, err := encodeJSON(r)
	if err != nil {
		return []byte(`{"v":1,"error":{"code":"internal","message":"cannot encode the answer"}}`)
	}
	return data
}
