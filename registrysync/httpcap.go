package registrysync

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
}

func (t *cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		resp.Body = &cappedEvents{ReadCloser: resp.Body, limit: t.limit}
	} else {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.limit}
	}
	return resp, nil
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
