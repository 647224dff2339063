package registrysync

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/jsonscan"
	"github.com/mcpstream/mcpstream/subjects"
)

// errResponseTooLarge is the error of an answer over its bound: an HTTP response or one of its
// events (see cappedTransport), a stdio line (see child.tooLarge).
var errResponseTooLarge = errors.New("the server's answer is too large")

// cappedTransport bounds what an MCP server's HTTP responses may make the connector read: a
// JSON body to limit bytes, and each event of an event stream (text/event-stream) to limit
// bytes. mcp-go decodes bodies and events whole, without a bound: a hostile server answering
// with a huge body could make the process run out of memory (a 256 MiB tools/list cost ~1.5 GiB
// of heap before it was rejected as too large). Reading a body past the bound fails with
// errResponseTooLarge; an event past it is discarded by the event filter (sseRequests), which
// fails only the request it answers (see oversize.go). A JSON body that is a JSON-RPC batch is
// handed to mcp-go as an event stream, which the filter takes apart.
//
// It also sends requests to origin (scheme://host:port of the configured URL) only: every
// request carries the configured headers, and a legacy SSE server's endpoint event names the
// URL messages go to. mcp-go checks only the endpoint's host and port, not its scheme, so an
// https server could have the credentials sent in clear text (http:// on the same host).
type cappedTransport struct {
	next   http.RoundTripper
	limit  int64
	origin string // of the configured URL (see origin); "": any
	// host is the configured URL's host as written (url.URL.Host), which mcp-go compares a
	// legacy SSE endpoint's with (see sseRequests.endpointAsConfigured).
	host string
	// serverRequests, when set (legacy HTTP+SSE), answers the requests a server sends on an
	// event stream, which are taken out of it (see sseRequests).
	serverRequests func(id json.RawMessage, method string)
	// listenOpened, when set (legacy streamable HTTP), is called whenever the standalone GET
	// event stream opens: mcp-go reopens it by itself when it ends, and the notifications sent
	// meanwhile are lost. A GET that resumes a request's stream (Last-Event-ID) is not it.
	listenOpened func()
	// discarded, when set, is told of each event discarded as too large, or batch refused.
	discarded func(what string)
	// legacySSE is set for a legacy HTTP+SSE server: its opening GET's endpoint event is checked
	// (see sseRequests.endpointElsewhere).
	legacySSE bool
}

// CloseIdleConnections closes the idle keep-alive connections of the transport underneath.
// http.Client.CloseIdleConnections calls it only on a transport that has the method: without
// it, the session's close (see session.close) closed nothing, and each session ended (a
// reconnection, a server removed) left its connections idle until the idle timeout (90 s) — a
// socket and three goroutines here, a connection on the MCP server. The transport stays usable:
// a request after it dials again.
func (t *cappedTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if o := origin(r.URL); t.origin != "" && o != t.origin {
		if r.Body != nil {
			_ = r.Body.Close() // (a RoundTripper closes the body, even on error)
		}
		return nil, fmt.Errorf("refused to send a request to %s, not the configured URL's origin %s: the server's credentials would go with it", o, t.origin)
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if err := t.redirectElsewhere(resp); err != nil {
		if resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	if r.Method == http.MethodPost {
		if cp, _ := r.Context().Value(captureKey{}).(*capture); cp != nil {
			cp.httpAnswered(resp) // mcp-go reports most statuses as error text only
		}
	} else if cp, _ := r.Context().Value(openKey{}).(*capture); cp != nil && r.Method == http.MethodGet {
		cp.httpAnswered(resp) // a legacy SSE server's opening GET (openSession)
	}
	if resp.Body == nil {
		return resp, err
	}
	if err := notAnEventStream(r, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	answer := t.serverRequests
	if r.Context().Value(answerKey{}) != nil {
		answer = nil // the stream of a POST that answers a server's request (see answerKey)
	}
	want, _ := r.Context().Value(requestIDKey{}).(mcp.RequestId)
	var endpointBase *url.URL
	if t.legacySSE && r.Method == http.MethodGet && r.Context().Value(openKey{}) != nil && t.origin != "" {
		endpointBase = r.URL // a legacy SSE server's stream: its endpoint event is checked
	}
	events := func(body io.ReadCloser, limit int64) *sseRequests {
		f := &sseRequests{src: body, answer: answer, limit: limit, discarded: t.discarded,
			endpointBase: endpointBase, origin: t.origin, host: t.host}
		if !want.IsNil() {
			f.want = idValue(want)
			f.wantJSON, _ = json.Marshal(want)
		}
		return f
	}
	if sse := mediaType(resp) == "text/event-stream"; sse || untypedStream(r, resp) {
		// (A GET carrying a request's id resumes that request's stream: SEP-1699.)
		if sse && r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && t.listenOpened != nil && want.IsNil() {
			t.listenOpened()
		}
		// Each event is bounded by the filter, which discards one over the bound (see
		// oversize.go): the stream itself may run for ever.
		resp.Body = events(resp.Body, t.limit)
		return resp, nil
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.limit}
	if r.Method == http.MethodPost && resp.StatusCode >= 200 && resp.StatusCode <= 299 && !want.IsNil() {
		if batch, ok := jsonBatch(resp, want); ok {
			// A JSON-RPC batch answering the request (2025-03-26): mcp-go would fail to decode
			// it, losing the notifications and requests in it. It is handed to mcp-go as an
			// event stream of one event, which the filter takes apart.
			resp.Header.Set("Content-Type", "text/event-stream")
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
			resp.Body = events(batch, t.limit+sseReadSize) // (the event's framing on top)
		} else if batch == nil && isJSON(resp) {
			resp.Body = brokenJSONBody(resp.Body, want)
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
		}
	}
	return resp, nil
}

// redirectElsewhere is the error of a redirect to another origin than the configured URL's,
// which the client is not to follow (see sameOriginRedirect). It is refused here, before the
// client sees it: a refusal by CheckRedirect comes out of the client as a *url.Error quoting the
// Location whole, path and query included, before the reason — a long one, the server's choice,
// cut the reason out of the status and of a call's error, and a short one had its query (a
// token) quoted. Refused here, the error quotes the request's URL (the configured one, as any
// transport error does) and names the target by its origin only.
func (t *cappedTransport) redirectElsewhere(resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect: // (those the client follows)
	default:
		return nil
	}
	loc, err := resp.Location()
	if err != nil || t.origin == "" {
		return nil // none or unparsable: the client does not follow it
	}
	if to := origin(loc); to != t.origin {
		return fmt.Errorf("refused a redirect from %s to another origin, %s: the server's credentials would go with it", t.origin, truncate(to, 256))
	}
	return nil
}

// brokenJSONBody reads the JSON body of resp, the answer to request want, that is not an
// array, and returns it whole or, when it is not valid JSON (a NaN in it, cut short, a member
// after the message), a local answer that fails the request as a stdio line that is not JSON
// fails its call (brokenAnswerError: protocol_error, not outcome_unknown; a list
// malformed_response). A body whose reading fails (the connection lost, over the bound) fails
// as before, with that error; an empty one is passed on as it is.
func brokenJSONBody(body io.ReadCloser, want mcp.RequestId) io.ReadCloser {
	data, err := io.ReadAll(body)
	_ = body.Close()
	switch {
	case err != nil:
		return io.NopCloser(&errReader{err})
	case len(bytes.TrimSpace(data)) > 0 && !json.Valid(data):
		wantJSON, _ := json.Marshal(want)
		data = brokenAnswerLocal(wantJSON, data)
	}
	return io.NopCloser(bytes.NewReader(data))
}

// jsonBatch reads the JSON body of resp, the answer to request want, when it is an array (a
// JSON-RPC batch), and returns it as the one event of an event stream: its data the batch on
// one line, or, if it is too large or not JSON, a local answer that fails the request. It
// reports false, having read no more than the whitespace before it, for a body of another type
// or that is not an array.
func jsonBatch(resp *http.Response, want mcp.RequestId) (io.ReadCloser, bool) {
	if !isJSON(resp) {
		return nil, false
	}
	br := bufio.NewReaderSize(resp.Body, 512)
	body := struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
	resp.Body = body
	for {
		b, err := br.Peek(1)
		if err != nil {
			return nil, false
		}
		if b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n' {
			_, _ = br.Discard(1)
			continue
		}
		if b[0] != '[' {
			return nil, false
		}
		break
	}
	data, err := io.ReadAll(br)
	_ = body.Close()
	wantJSON, _ := json.Marshal(want)
	var line bytes.Buffer
	switch {
	case errors.Is(err, errResponseTooLarge):
		line.Write(localAnswer(wantJSON, localTooLarge, fmt.Sprintf("a JSON-RPC batch of more than %d bytes", len(data))))
	case err != nil:
		return io.NopCloser(&errReader{err}), true
	case json.Compact(&line, data) != nil:
		line.Reset()
		line.Write(localAnswer(wantJSON, localBatch, ""))
	}
	ev := append([]byte("event: message\ndata: "), line.Bytes()...)
	ev = append(ev, "\n\n"...)
	return io.NopCloser(bytes.NewReader(ev)), true
}

// isJSON reports whether resp's body is application/json.
func isJSON(resp *http.Response) bool { return mediaType(resp) == "application/json" }

// mediaType is resp's media type as mcp-go reads it: mime.ParseMediaType's, an error in the
// parameters ignored. What the filter and checks here take for an event stream or JSON must be
// what mcp-go takes for one: a type they read otherwise (a Content-Type starting with a
// no-break space, which ParseMediaType trims; parameters it cannot parse) had mcp-go read an
// event stream that bypassed the filter (sseRequests): answers to other requests, server
// requests, batches and events of any size went to mcp-go as they came.
func mediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

// untypedStream reports whether resp, without a Content-Type, answers a GET that opens an event
// stream: mcp-go's legacy SSE transport reads any 200 as one (see notAnEventStream), so it goes
// through the filter as a typed one does.
func untypedStream(r *http.Request, resp *http.Response) bool {
	return r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "" &&
		strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// refusedStatus is the dispatch error for a request the server answered with an HTTP status
// that says it did not process it, or nil: 400, 403, 405, 413, 415, 422 and 429. mcp-go
// reports them as error text, which used to make a tools/call outcome_unknown. 429 is
// unavailable with the server's Retry-After, if any; 413 is too_large; 400 and 422, a request
// the server found malformed, are bad_request; 403, 405 and 415 are unavailable. (401 and 404
// are handled by refusedUnrun.) All of them are codes that say nothing was sent. No 5xx is
// among them, 503 included: a proxy answers 503 when the server's connection ends after the
// request went out (Envoy's "upstream connect error or disconnect/reset before headers"), say
// a server that crashed after the tool's side effect, and the executor retries a call that
// was not sent.
func refusedStatus(status int, retryAfter string, now time.Time) *subjects.Error {
	code := subjects.CodeUnavailable
	switch status {
	case http.StatusTooManyRequests, http.StatusForbidden, http.StatusMethodNotAllowed,
		http.StatusUnsupportedMediaType:
	case http.StatusRequestEntityTooLarge:
		code = subjects.CodeTooLarge
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = subjects.CodeBadRequest
	default:
		return nil
	}
	e := &subjects.Error{Code: code, Message: fmt.Sprintf("the server refused the request with HTTP %d (%s); nothing ran", status, http.StatusText(status))}
	if status == http.StatusTooManyRequests {
		e.RetryAfterMs = retryAfterMs(retryAfter, now)
	}
	return e
}

// maxRetryAfter bounds the wait a server's Retry-After asks for: a hostile or broken one may
// ask for years.
const maxRetryAfter = time.Hour

// retryAfterMs is an HTTP Retry-After (seconds, or a date) in milliseconds from now, at most
// maxRetryAfter; 0 when absent, malformed or past.
func retryAfterMs(v string, now time.Time) int64 {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		d = time.Duration(min(secs, uint64(maxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = min(at.Sub(now), maxRetryAfter)
	}
	return max(d.Milliseconds(), 0)
}

// notAnEventStream refuses the answer to a GET that opens an event stream (the legacy SSE
// connection, the streamable HTTP listening stream) when it is a 200 of another type: a login
// page, a proxy's error page, a wrong path. mcp-go would read it as an event stream with no
// events, and the handshake would wait ConnectTimeout for an endpoint event that never comes.
// An answer without a Content-Type is read as the event stream it may be.
func notAnEventStream(r *http.Request, resp *http.Response) error {
	if r.Method != http.MethodGet || resp.StatusCode != http.StatusOK || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" || mediaType(resp) == "text/event-stream" {
		return nil
	}
	return fmt.Errorf("the URL answered Content-Type %q, not an event stream (text/event-stream): check the URL (a login or error page?)", truncate(ct, 100))
}

// cappedBody fails a read once more than its limit was read.
type cappedBody struct {
	io.ReadCloser
	left int64
	read int64 // taken so far
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the limit tells an over-long body
	}
	limit := b.read + b.left
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		// (the bound, not the size of this read, which it once said)
		return 0, fmt.Errorf("%w (over %d bytes)", errResponseTooLarge, limit)
	}
	b.read += int64(n)
	return n, err
}

// sseRequests takes the requests a server sends on an event stream out of it. mcp-go's SSE
// transport has no request handler: it takes every message with an id for a response, so a
// server's request (ping, sampling, roots...) whose id equals that of a request in flight
// completed that request with an empty answer, and the server never got a reply; its
// streamable HTTP transport answers each on a goroutine of its own. Each complete event is
// passed through, except a "message" event holding a JSON-RPC request, which is handed to
// answer (on the reader's goroutine, so a server flooding requests stalls its own stream
// rather than growing goroutines; nil: dropped unanswered) and dropped.
//
// On the stream of one request (a streamable HTTP POST, or the GET resuming it), want is that
// request's id (mcp.RequestId.String()): mcp-go takes the first response on the stream for the
// request's, whatever its id, and blocks for ever handing over a third. An answer with another
// id (a gateway routing a late answer to an earlier call to this stream) is dropped, and the
// stream ends after the request's own.
//
// An event over limit bytes (0: no limit) is discarded up to its end, and a JSON-RPC batch taken
// apart, as oversize.go says: an answer to a request in flight among them fails it through a
// local answer (on the request's own stream, its answer ends the stream; on a legacy SSE
// stream, mcp-go's transport matches it to the request).
type sseRequests struct {
	src      io.ReadCloser
	answer   func(id json.RawMessage, method string)
	want     string
	wantJSON []byte // want as its JSON text
	limit    int64
	// skip is the event being discarded, too large, nil while none is.
	skip      *skippedEvent
	discarded func(what string)
	last      bool   // the answer to want was passed: nothing more is read
	in        []byte // read, not yet split into events: the start of the next event
	line      int    // where the line being read starts in in
	seen      int    // in[:seen] was searched for line ends (none twice: an event may be MiBs)
	out       []byte // events ready for the reader
	err       error  // of src, returned once out is drained
	stop      error  // ends the stream: what is read after it is dropped (see endpointElsewhere)
	// endpointBase, on a legacy SSE server's stream, is its URL, which the endpoint event is
	// resolved against; its origin must be origin (see endpointElsewhere), and it is written
	// with host (see endpointAsConfigured).
	endpointBase *url.URL
	origin       string
	host         string
}

// endpointError ends a legacy SSE server's stream whose endpoint event is refused.
type endpointError struct{ msg string }

func (e *endpointError) Error() string { return e.msg }

// endpointElsewhere is the error of an endpoint event (data, the URL messages are to be POSTed
// to) that cannot be parsed or names another origin than the configured URL's, or nil. mcp-go
// logs such an event and goes on waiting for another, so the connection failed only after
// ConnectTimeout, saying it timed out; a scheme downgrade (https to http) it takes, and the
// first request was refused (cappedTransport). Refused here, the stream ends at once and the
// connection fails saying why. The error names the endpoint's origin only: its path and query
// may hold a session token.
func (f *sseRequests) endpointElsewhere(data []byte) error {
	u, err := f.endpointBase.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return &endpointError{"the server's endpoint event is not a URL: refused"}
	}
	if to := origin(u); to != f.origin {
		return &endpointError{fmt.Sprintf("the server's endpoint event names another origin, %s, than the configured URL's, %s: refused, the server's credentials would go with every message",
			truncate(to, 256), f.origin)}
	}
	return nil
}

// endpointAsConfigured is data, an endpoint event that endpointElsewhere let through, with its
// host written as the configured URL's (f.host), or nil if it names none or that one. mcp-go
// compares the endpoint's host with the configured URL's as written: one of the same origin
// written otherwise (the default port written out, http://127.0.0.1:80/message for
// http://127.0.0.1/sse, or left out; a name's case) it ignored, and it waited on for another
// endpoint until ConnectTimeout. The origin being the same, so is the URL.
func (f *sseRequests) endpointAsConfigured(data []byte) []byte {
	u, err := url.Parse(strings.TrimSpace(string(data)))
	if err != nil || u.Host == "" || f.host == "" || u.Host == f.host {
		return nil
	}
	u.Host = f.host
	return []byte(u.String())
}

// sseReadSize is how much the filter reads from the stream at once; sseKeep is the buffer
// it keeps between events (one grown for a large event is released).
const (
	sseReadSize = 32 << 10
	sseKeep     = 4 * sseReadSize
)

func (f *sseRequests) Close() error { return f.src.Close() }

func (f *sseRequests) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil && f.skip != nil {
			f.endSkip() // an event cut short while discarded: its start may say whose answer
			continue
		}
		if f.err != nil {
			if len(f.in) > 0 { // an event cut short: passed on as it is
				f.out, f.in, f.line, f.seen = f.in, nil, 0, 0
				break
			}
			return 0, f.err
		}
		// Read straight into the buffer's free room: no buffer per read.
		if cap(f.in)-len(f.in) < sseReadSize/2 {
			f.in = slices.Grow(f.in, sseReadSize)
		}
		n, err := f.src.Read(f.in[len(f.in):cap(f.in)])
		f.in = f.in[:len(f.in)+n]
		f.err = err
		f.split()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 {
		f.out = nil
	}
	return n, nil
}

// split moves every complete event (up to and including the blank line ending it) from in to
// out, dropping and answering server requests.
func (f *sseRequests) split() {
	if f.skip != nil && !f.skipping() {
		return
	}
	if f.last {
		f.in, f.line, f.seen, f.err = nil, 0, 0, io.EOF
		return
	}
	start, pos, from := 0, f.line, f.seen
	for {
		i := bytes.IndexByte(f.in[from:], '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimRight(f.in[pos:from+i], "\r")
		pos = from + i + 1
		from = pos
		if len(line) > 0 {
			continue
		}
		event := f.in[start:pos]
		start = pos
		if f.limit > 0 && int64(len(event)) > f.limit {
			// Over the bound, though it came whole: discarded (see beginSkip).
			k := &skippedEvent{head: append([]byte(nil), event[:min(len(event), 4*idWindow)]...)}
			k.keep(event)
			f.skip = k
			f.endSkip()
		} else {
			f.emit(event)
		}
		if f.stop != nil {
			f.in, f.line, f.seen, f.err = nil, 0, 0, f.stop
			return
		}
		if f.last {
			f.in, f.line, f.seen, f.err = nil, 0, 0, io.EOF
			return
		}
	}
	f.line, f.seen = pos-start, len(f.in)-start
	if f.limit > 0 && int64(len(f.in)-start) > f.limit {
		// An event over the bound, not ended yet: discarded from here to its end.
		f.beginSkip(f.in[start:])
		return
	}
	if start == 0 {
		return // one event still coming in
	}
	rest := f.in[start:]
	if cap(f.in) > sseKeep && len(rest) <= sseKeep/2 {
		f.in = append(make([]byte, 0, sseReadSize+len(rest)), rest...)
		return
	}
	f.in = append(f.in[:0], rest...)
}

// parseEvent is the name, the data and the id line (with its line end) of an event.
func parseEvent(event []byte) (name string, data, idLine []byte) {
	for _, line := range bytes.Split(event, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			name = string(bytes.TrimSpace(v))
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		} else if bytes.HasPrefix(line, []byte("id:")) {
			idLine = append(append([]byte(nil), line...), '\n')
		}
	}
	return name, data, idLine
}

// emit passes event on (to out) unless take took it; a JSON-RPC batch is taken apart first,
// each of its messages an event of its own (the batch's id line, which a client resuming the
// stream sends back, on the last).
func (f *sseRequests) emit(event []byte) {
	name, data, idLine := parseEvent(event)
	if name == "endpoint" && f.endpointBase != nil {
		if err := f.endpointElsewhere(data); err != nil {
			f.stop = err
			return
		}
		if fixed := f.endpointAsConfigured(data); fixed != nil {
			event = slices.Concat([]byte("event: endpoint\n"), idLine, []byte("data: "), fixed, []byte("\n\n"))
		}
	}
	if msg := bytes.TrimSpace(data); (name == "" || name == "message") && isBatch(msg) && json.Valid(msg) {
		elems, err := splitBatch(msg)
		if err != nil {
			f.refused(fmt.Sprintf("a JSON-RPC batch of %d bytes: %v", len(msg), err), nil, localBatch, "")
			return
		}
		for i, e := range elems {
			var one bytes.Buffer
			one.WriteString("event: message\n")
			if i == len(elems)-1 {
				one.Write(idLine)
			}
			one.WriteString("data: ")
			if bytes.ContainsAny(e, "\r\n") {
				_ = json.Compact(&one, e) // (valid: the batch is)
			} else {
				one.Write(e)
			}
			one.WriteString("\n\n")
			if !f.take(one.Bytes()) {
				f.out = append(f.out, one.Bytes()...)
			}
			if f.last {
				return
			}
		}
		return
	}
	if msg := bytes.TrimSpace(data); (name == "" || name == "message") && len(msg) > 0 && !json.Valid(msg) {
		// An answer that is not valid JSON (mcp-go would drop it, and its request wait for an
		// answer that never comes, or its stream end without one) fails its request as a
		// stdio line that is not JSON fails its call: when its id can be read as that of an
		// event too large (oversizeID), and, on a request's own stream, is that request's.
		id, ok := oversizeID(msg[:min(len(msg), idWindow)], msg[max(0, len(msg)-idWindow):])
		if ok && (f.want == "" || strings.Trim(string(id), `"`) == f.want) {
			if f.discarded != nil {
				f.discarded("an event that is not valid JSON, an answer to id " + truncate(string(id), 40))
			}
			if f.want != "" {
				f.last = true
			}
			f.out = append(f.out, "event: message\ndata: "...)
			f.out = append(f.out, brokenAnswerLocal(id, msg)...)
			f.out = append(f.out, "\n\n"...)
			return
		}
	}
	if !f.take(event) {
		f.out = append(f.out, event...)
	}
}

// refused drops what (a batch refused, an event too large), failing the request it answers:
// id's (nil: unknown), or, on a request's own stream, that request unless id names another.
// kind and detail make the local answer (oversize.go).
func (f *sseRequests) refused(what string, id []byte, kind, detail string) {
	if f.discarded != nil {
		f.discarded(what)
	}
	switch {
	case f.want != "" && (id == nil || strings.Trim(string(id), `"`) == f.want):
		// The request's own stream: its answer was in what was dropped, or may have been.
		id = f.wantJSON
		f.last = true
	case id == nil:
		return
	}
	f.out = append(f.out, "event: message\ndata: "...)
	f.out = append(f.out, localAnswer(id, kind, detail)...)
	f.out = append(f.out, "\n\n"...)
}

// skippedEvent is an event discarded as too large: its first bytes, its last ones so far, and
// whether the line being read is blank so far.
type skippedEvent struct {
	head, tail []byte
	lineBlank  bool
}

// beginSkip starts discarding ev, the start of an event over the bound (no blank line in it).
func (f *sseRequests) beginSkip(ev []byte) {
	k := &skippedEvent{head: append([]byte(nil), ev[:min(len(ev), 4*idWindow)]...)}
	k.lineBlank = len(bytes.Trim(ev[f.line:], "\r")) == 0
	k.keep(ev)
	f.skip = k
	f.in, f.line, f.seen = nil, 0, 0 // (a new buffer: this one may be large)
}

func (k *skippedEvent) keep(b []byte) {
	k.tail = append(k.tail, b[max(0, len(b)-idWindow):]...)
	if len(k.tail) > idWindow {
		k.tail = append(k.tail[:0], k.tail[len(k.tail)-idWindow:]...)
	}
}

// skipping discards in up to the end of the event being skipped, reporting whether it ended
// (what follows it is then left in in).
func (f *sseRequests) skipping() bool {
	k := f.skip
	for i, c := range f.in {
		switch c {
		case '\n':
			if k.lineBlank {
				k.keep(f.in[:i])
				f.in = append(f.in[:0], f.in[i+1:]...)
				f.endSkip()
				return true
			}
			k.lineBlank = true
		case '\r':
		default:
			k.lineBlank = false
		}
	}
	k.keep(f.in)
	f.in = f.in[:0]
	return false
}

// endSkip ends the discarding of an event: an answer whose id can be read from its first and
// last bytes (oversizeID) fails its request.
func (f *sseRequests) endSkip() {
	k := f.skip
	f.skip = nil
	name, _, _ := parseEvent(k.head)
	data := k.head
	if i := bytes.Index(data, []byte("data:")); i >= 0 {
		data = bytes.TrimPrefix(data[i+len("data:"):], []byte(" "))
	} else {
		data = nil
	}
	what := fmt.Sprintf("an event of more than %d bytes", f.limit)
	if name != "" && name != "message" || data == nil {
		if f.discarded != nil {
			f.discarded(what)
		}
		return
	}
	id, ok := oversizeID(data, k.tail)
	if !ok {
		if f.discarded != nil {
			f.discarded(what + ", not an answer whose id could be read at its start or end")
		}
		return
	}
	if f.want != "" && strings.Trim(string(id), `"`) != f.want {
		if f.discarded != nil {
			f.discarded(what + ", the answer to another request")
		}
		return
	}
	f.refused(what+", an answer to id "+truncate(string(id), 40), id, localTooLarge, what)
}

// take answers and reports true when event is a message holding a JSON-RPC request; it also
// takes (true) an answer to another request on a request's own stream, and replaces with a
// local answer (errMalformedAnswer) an answer that mcp-go could not decode (malformedAnswer),
// which it would drop: the request waited for its timeout, or failed outcome_unknown when the
// stream ended.
func (f *sseRequests) take(event []byte) bool {
	name, data, _ := parseEvent(event)
	if name != "" && name != "message" || f.want == "" && !mayHoldMember(data, "method") && !mayHoldMember(data, "error") &&
		!jsonrpcNotString(data) {
		return false
	}
	var m struct {
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		JSONRPC json.RawMessage `json:"jsonrpc"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return false // a notification (or not JSON): mcp-go handles it
	}
	if m.Method != nil {
		if f.answer != nil {
			f.answer(m.ID, *m.Method)
		}
		return true
	}
	if f.want == "" {
		// A legacy SSE stream: mcp-go's transport matches the answer to its request by id.
		if bad := malformedAnswer(m.JSONRPC, m.Error); bad != "" {
			f.refused("an answer "+bad, m.ID, localMalformed, bad)
			return true
		}
		return false
	}
	var id mcp.RequestId
	if json.Unmarshal(m.ID, &id) != nil || idValue(id) != f.want {
		return true // the answer to another request
	}
	if bad := malformedAnswer(m.JSONRPC, m.Error); bad != "" {
		// mcp-go would drop it (a message it cannot decode) and wait on: the request fails now.
		f.refused("an answer "+bad, m.ID, localMalformed, bad)
		return true
	}
	f.last = true
	return false
}

// jsonrpcNotString reports whether data, a message, has a member encoding/json takes for
// jsonrpc whose value is not a string (nor null), which mcp-go cannot decode: one top-level
// scan, nothing decoded (a legacy SSE stream's answers are not all parsed, see take).
func jsonrpcNotString(data []byte) bool {
	bad := false
	jsonscan.Members(data, func(name, value []byte) {
		if !bad && len(value) > 0 && value[0] != '"' && value[0] != 'n' && isMemberName(name, "jsonrpc") {
			bad = true
		}
	})
	return bad
}

// malformedAnswer says why an answer whose members jsonrpc and error (raw, absent: nil) are
// these is one mcp-go cannot decode as a JSON-RPC response ("" if it can).
func malformedAnswer(jsonrpc, rpcErr json.RawMessage) string {
	var s string
	if len(jsonrpc) > 0 && json.Unmarshal(jsonrpc, &s) != nil {
		return `whose "jsonrpc" is not a string`
	}
	var e mcp.JSONRPCErrorDetails
	if len(rpcErr) > 0 && json.Unmarshal(rpcErr, &e) != nil {
		return `whose "error" is neither an object with an integer code and a string message nor a string`
	}
	return ""
}

// maxRetryAfterWait bounds how long a connector waits, before reconnecting or listing again,
// for a server whose HTTP 429 or 503 asked for more with its Retry-After: a hostile or broken
// one (Retry-After: 31536000) must not park the connector for a year.
const maxRetryAfterWait = 10 * time.Minute

// retryAfterError is a failure whose HTTP answer, a 429 or a 503, asked the client to come
// back no sooner than after (Retry-After, at most maxRetryAfterWait).
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// withRetryAfter is err carrying the Retry-After of the HTTP answer cp records, when that is a
// 429 or a 503 with a Retry-After that is well-formed and not past; err otherwise.
func withRetryAfter(err error, cp *capture, now time.Time) error {
	if err == nil || cp == nil {
		return err
	}
	status, retryAfter := cp.httpStatus()
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return err
	}
	return withWait(err, time.Duration(retryAfterMs(retryAfter, now))*time.Millisecond)
}

// withWait is err carrying the wait after (none if 0).
func withWait(err error, after time.Duration) error {
	if err == nil || after <= 0 {
		return err
	}
	return &retryAfterError{err: err, after: min(after, maxRetryAfterWait)}
}

// retryAfterOf is the wait a failure's HTTP answer asked for (0: none).
func retryAfterOf(err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after
	}
	return 0
}

// retryWait is the wait before the next attempt after err: the backoff's, or the Retry-After
// err carries if that is longer.
func retryWait(backoff time.Duration, err error) time.Duration {
	return max(backoff, retryAfterOf(err))
}
