package registrysync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/subjects"
)

// errResponseTooLarge is the read error of an HTTP response over its bound (see cappedTransport).
var errResponseTooLarge = errors.New("the server's HTTP response is too large")

// cappedTransport bounds what an MCP server's HTTP responses may make the connector read: a
// JSON body to limit bytes, and each event of an event stream (text/event-stream) to limit
// bytes. mcp-go decodes bodies and events whole, without a bound: a hostile server answering
// with a huge body could make the process run out of memory (a 256 MiB tools/list cost ~1.5 GiB
// of heap before it was rejected as too large). Reading past the bound fails with
// errResponseTooLarge.
type cappedTransport struct {
	next  http.RoundTripper
	limit int64
	// serverRequests, when set (legacy HTTP+SSE), answers the requests a server sends on an
	// event stream, which are taken out of it (see sseRequests).
	serverRequests func(id json.RawMessage, method string)
	// listenOpened, when set (legacy streamable HTTP), is called whenever a GET event stream
	// opens: mcp-go reopens the standalone stream by itself when it ends, and the
	// notifications sent meanwhile are lost.
	listenOpened func()
}

func (t *cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if r.Method == http.MethodPost {
		if cp, _ := r.Context().Value(captureKey{}).(*capture); cp != nil {
			cp.httpAnswered(resp) // mcp-go reports most statuses as error text only
		}
	}
	if resp.Body == nil {
		return resp, err
	}
	if err := notAnEventStream(r, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && t.listenOpened != nil {
			t.listenOpened()
		}
		resp.Body = &cappedEvents{ReadCloser: resp.Body, limit: t.limit}
		answer := t.serverRequests
		if r.Context().Value(answerKey{}) != nil {
			answer = nil // the stream of a POST that answers a server's request (see answerKey)
		}
		want, _ := r.Context().Value(requestIDKey{}).(mcp.RequestId)
		if answer != nil || !want.IsNil() {
			f := &sseRequests{src: resp.Body, answer: answer}
			if !want.IsNil() {
				f.want = idValue(want)
			}
			resp.Body = f
		}
	} else {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.limit}
	}
	return resp, nil
}

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
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "text/event-stream" {
		return nil
	}
	return fmt.Errorf("the URL answered Content-Type %q, not an event stream (text/event-stream): check the URL (a login or error page?)", truncate(ct, 100))
}

// cappedBody fails a read once more than its limit was read.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the limit tells an over-long body
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("%w (over %d bytes)", errResponseTooLarge, int64(n)+b.left-1)
	}
	return n, err
}

// cappedEvents fails a read once one server-sent event (its lines up to the blank line that
// ends it) exceeds the limit: the stream itself may run for ever.
type cappedEvents struct {
	io.ReadCloser
	limit   int64
	event   int64 // bytes of the current event
	lineLen int64 // bytes of the current line, without its line ending
}

func (e *cappedEvents) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch c {
		case '\n':
			if e.lineLen == 0 {
				e.event = 0 // a blank line ends the event
			}
			e.lineLen = 0
		case '\r':
		default:
			e.lineLen++
			e.event++
		}
		if e.event > e.limit {
			return 0, fmt.Errorf("%w (an event over %d bytes)", errResponseTooLarge, e.limit)
		}
	}
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
type sseRequests struct {
	src    io.ReadCloser
	answer func(id json.RawMessage, method string)
	want   string
	last   bool   // the answer to want was passed: nothing more is read
	in     []byte // read, not yet split into events: the start of the next event
	line   int    // where the line being read starts in in
	seen   int    // in[:seen] was searched for line ends (none twice: an event may be MiBs)
	out    []byte // events ready for the reader
	err    error  // of src, returned once out is drained
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
		if !f.take(event) {
			f.out = append(f.out, event...)
		}
		if f.last {
			f.in, f.line, f.seen, f.err = nil, 0, 0, io.EOF
			return
		}
	}
	f.line, f.seen = pos-start, len(f.in)-start
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

// take answers and reports true when event is a message holding a JSON-RPC request.
func (f *sseRequests) take(event []byte) bool {
	var name string
	var data []byte
	for _, line := range bytes.Split(event, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			name = string(bytes.TrimSpace(v))
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	if name != "" && name != "message" || f.want == "" && !mayHoldMember(data, "method") {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
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
		return false
	}
	var id mcp.RequestId
	if json.Unmarshal(m.ID, &id) != nil || idValue(id) != f.want {
		return true // the answer to another request
	}
	f.last = true
	return false
}
