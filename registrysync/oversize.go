package registrysync

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// Messages too large to take, and JSON-RPC batches, on every transport.
//
// A message (a stdio line, an event of an event stream) longer than the transport takes is
// discarded up to its end (its newline, the blank line ending the event): the connection and
// the other requests go on. Only when it can be attributed to a request, cheaply and without
// reading it whole, does that request fail: when the start of the message shows a response
// (its first members, before any "method", reach "result" or "error") whose id is among those
// first members, or, as the TypeScript SDK writes it, its very last member (oversizeID). The
// request then gets a local answer (localAnswer) that the transport wrapper turns into
// errResponseTooLarge. A notification or a request of the server's that is too large, or a
// message whose id cannot be read so, is dropped and logged, failing nothing.
//
// A JSON array is a JSON-RPC batch (MCP 2025-03-26 had them, and a client had to accept them;
// later versions dropped them). A batch of at most maxBatch messages is taken apart, and each
// message handled as if it came alone (answers matched by id, server requests answered,
// notifications passed on). A larger one, or one that is not all objects, is refused whole:
// what it answers fails at once with errBadBatch (on stdio, where which requests it answers
// cannot be known without reading it, as a line that is not JSON does: the handshake and lists
// in flight end malformed_response, and the tools/calls whose answers among its first maxBatch
// messages show an id as oversizeID reads it end protocol_error), rather than waiting for its
// timeout.

// maxBatch bounds the messages of one JSON-RPC batch: this client never sends batches, so a
// server has no reason to send many at once.
const maxBatch = 1024

// errBadBatch is the error of a request whose answer came in a JSON-RPC batch that was refused.
var errBadBatch = fmt.Errorf("the server sent a JSON-RPC batch of more than %d messages, or of something else than messages; refused whole", maxBatch)

// localMarker starts the message of a JSON-RPC error the connector makes up to end a request
// whose answer was discarded (localAnswer). Its random part keeps a server from making one.
var localMarker = func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "mcpstream-local-" + hex.EncodeToString(b[:]) + ":"
}()

// Kinds of local answers.
const (
	localTooLarge  = "too_large"
	localBatch     = "batch"
	localMalformed = "malformed"
	// localBroken: an answer that is not valid JSON (brokenAnswerLocal).
	localBroken = "broken"
)

// errMalformedAnswer is the error of a request whose answer, valid JSON with the request's id,
// is not of the shape of a JSON-RPC response (an "error" member that is neither an object with
// an integer code nor a string, a "jsonrpc" that is no string): mcp-go drops such an answer on
// an event stream, and the request waited for its timeout, or failed as if the connection had
// (see sseRequests.take), and fails to decode it in a JSON body (see malformedAnswer).
var errMalformedAnswer = errors.New("the server's answer is not a JSON-RPC response of the shape MCP gives it")

// brokenHead bounds the start of a broken answer a local answer carries (for the sample the
// error quotes once redacted; see brokenAnswerError).
const brokenHead = 64 << 10

// brokenAnswerError is the error of a request whose answer, an HTTP body or an event, was not
// valid JSON (a NaN in it, cut short): what is where it breaks, head how it begins (not
// redacted: see session.brokenText). On stdio the reader tells it straight to the call
// (child.brokenAnswer).
type brokenAnswerError struct{ what, head string }

func (e *brokenAnswerError) Error() string {
	return "the server's answer is not valid JSON: " + e.what
}

// brokenJSON says where msg, that is not valid JSON, breaks (json's syntax error names one
// character at most, quoted), or that it is cut short.
func brokenJSON(msg []byte) string {
	what := "it is cut short"
	var syn *json.SyntaxError
	if err := json.Unmarshal(msg, new(json.RawMessage)); errors.As(err, &syn) && syn.Offset < int64(len(msg)) {
		what = fmt.Sprintf("%s at byte %d of %d", syn.Error(), syn.Offset, len(msg))
	}
	return printable(what)
}

// brokenAnswerLocal is the local answer to id for msg, an answer that is not valid JSON.
func brokenAnswerLocal(id, msg []byte) []byte {
	return localAnswer(id, localBroken, brokenJSON(msg)+"\n"+string(msg[:min(len(msg), brokenHead)]))
}

// localAnswer is one line of JSON-RPC: an error answer to id (a JSON number or string, as
// oversizeID returns it) that base.SendRequest turns into the error of kind.
func localAnswer(id []byte, kind, detail string) []byte {
	msg, _ := json.Marshal(localMarker + kind + ":" + detail)
	out := make([]byte, 0, len(id)+len(msg)+64)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":{"code":-32603,"message":`...)
	out = append(out, msg...)
	return append(out, "}}"...)
}

// localError is the error a local answer stands for, or nil for an answer from the server.
func localError(e *mcp.JSONRPCErrorDetails) error {
	if e == nil {
		return nil
	}
	rest, ok := strings.CutPrefix(e.Message, localMarker)
	if !ok {
		return nil
	}
	kind, detail, _ := strings.Cut(rest, ":")
	switch kind {
	case localTooLarge:
		return fmt.Errorf("%w (%s)", errResponseTooLarge, detail)
	case localBatch:
		return errBadBatch
	case localMalformed:
		return fmt.Errorf("%w (%s)", errMalformedAnswer, detail)
	case localBroken:
		what, head, _ := strings.Cut(detail, "\n")
		return &brokenAnswerError{what: what, head: head}
	}
	return nil
}

// oversizeID reads the id of a message too large to take from head and tail, its first and
// last bytes (idWindow of each is plenty): ok only when head shows a response (its members,
// from the first, are "jsonrpc" and "id" until "result" or "error", in any case, as
// encoding/json matches them; a "method" makes it a request or a notification), and its id
// is a number or a string without escapes either among those first members or as the very
// last member of the message. The id is returned as its JSON text.
func oversizeID(head, tail []byte) (id []byte, ok bool) {
	p := skipWS(head)
	if len(p) == 0 || p[0] != '{' {
		return nil, false
	}
	p = p[1:]
	response := false
members:
	for {
		p = skipWS(p)
		key, rest, ok := plainString(p)
		if !ok {
			break
		}
		p = skipWS(rest)
		if len(p) == 0 || p[0] != ':' {
			break
		}
		p = skipWS(p[1:])
		switch k := string(key); {
		case strings.EqualFold(k, "id"):
			v, rest, ok := scalarID(p)
			if !ok {
				return nil, false // null, or something no request of ours has
			}
			id, p = v, rest
		case strings.EqualFold(k, "jsonrpc"):
			_, rest, ok := plainString(p)
			if !ok {
				break members
			}
			p = rest
		case strings.EqualFold(k, "method"):
			return nil, false
		case strings.EqualFold(k, "result"), strings.EqualFold(k, "error"):
			response = true
			break members
		default:
			break members
		}
		p = skipWS(p)
		if len(p) == 0 || p[0] != ',' {
			break
		}
		p = p[1:]
	}
	if !response {
		return nil, false
	}
	if id != nil {
		return id, true
	}
	return lastMemberID(tail)
}

// lastMemberID reads `"id": <number or plain string>}` at the very end of tail, preceded by a
// comma: in a JSON object that ends there, the last member of the message itself (the
// closing brace is the message's; a quote before "id" that were inside a string would be
// escaped).
func lastMemberID(tail []byte) ([]byte, bool) {
	p := bytes.TrimRight(tail, " \t\r\n")
	if len(p) == 0 || p[len(p)-1] != '}' {
		return nil, false
	}
	p = bytes.TrimRight(p[:len(p)-1], " \t\r\n")
	var v []byte
	if n := len(p); n > 0 && p[n-1] == '"' {
		i := bytes.LastIndexByte(p[:n-1], '"')
		if i < 0 {
			return nil, false
		}
		v, p = p[i:], p[:i]
		// (as at the start: no escapes, no control characters, at most 128 bytes)
		if _, _, ok := scalarID(v); !ok {
			return nil, false
		}
	} else {
		i := len(p)
		for i > 0 && bytes.IndexByte([]byte("0123456789+-.eE"), p[i-1]) >= 0 {
			i--
		}
		v, p = p[i:], p[:i]
		if _, _, ok := scalarID(v); !ok {
			return nil, false
		}
	}
	p = bytes.TrimRight(p, " \t\r\n")
	if len(p) == 0 || p[len(p)-1] != ':' {
		return nil, false
	}
	p = bytes.TrimRight(p[:len(p)-1], " \t\r\n")
	if len(p) < 4 || !strings.EqualFold(string(p[len(p)-4:]), `"id"`) {
		return nil, false
	}
	p = bytes.TrimRight(p[:len(p)-4], " \t\r\n")
	if len(p) == 0 || p[len(p)-1] != ',' {
		return nil, false
	}
	return v, true
}

func skipWS(p []byte) []byte { return bytes.TrimLeft(p, " \t\r\n") }

// plainString reads a JSON string without escapes at the start of p: its contents and the rest.
func plainString(p []byte) (s, rest []byte, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return nil, nil, false
	}
	i := bytes.IndexByte(p[1:], '"')
	if i < 0 || bytes.IndexByte(p[1:1+i], '\\') >= 0 {
		return nil, nil, false
	}
	return p[1 : 1+i], p[2+i:], true
}

// scalarID reads an id at the start of p, a string without escapes or a number (an integer,
// as this client's are, though any number a JSON-RPC id may be is read), returning its JSON
// text.
func scalarID(p []byte) (v, rest []byte, ok bool) {
	if len(p) > 0 && p[0] == '"' {
		s, rest, ok := plainString(p)
		if !ok || len(s) > 128 {
			return nil, nil, false
		}
		for _, c := range s {
			if c < 0x20 {
				return nil, nil, false
			}
		}
		return p[:len(s)+2], rest, true
	}
	i := 0
	if i < len(p) && p[i] == '-' {
		i++
	}
	digits := i
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == digits || i-digits > 20 || p[digits] == '0' && i-digits > 1 {
		return nil, nil, false // (no digits, too many, or leading zeros: not a JSON number)
	}
	if i < len(p) && bytes.IndexByte([]byte(".eE+-"), p[i]) >= 0 {
		return nil, nil, false // no request of ours has a fraction
	}
	return p[:i], p[i:], true
}

// batchElements calls fn with each element of the JSON array msg (valid JSON, starting with
// '['), as a slice of msg, and returns how many there are; fn nil only counts them. It stops
// counting past limit (then returning limit+1, fn not called beyond).
func batchElements(msg []byte, limit int, fn func(elem []byte)) int {
	n := 0
	depth := 0
	inString, escaped := false, false
	start := -1
	end := func(i int) {
		if start >= 0 {
			n++
			if fn != nil && n <= limit {
				fn(msg[start:i])
			}
		}
		start = -1
	}
	for i := 1; i < len(msg) && n <= limit; i++ {
		c := msg[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			if depth == 0 && start >= 0 {
				// trailing whitespace of an element at the top level: the element ends at the
				// comma or bracket; a scalar's text ends here.
				end(i)
			}
			continue
		case ',':
			if depth == 0 {
				end(i)
				continue
			}
		case ']':
			if depth == 0 {
				end(i)
				return n
			}
			depth--
		case '}':
			depth--
		case '[', '{':
			depth++
			if depth == 1 && start < 0 {
				start = i
			}
			continue
		case '"':
			inString = true
		}
		if depth == 0 && start < 0 {
			start = i
		}
	}
	return n
}

// splitBatch returns the messages of a JSON-RPC batch (msg: a valid JSON array), or an error
// when it is refused (errBadBatch): more than maxBatch, none, or not all objects.
func splitBatch(msg []byte) ([][]byte, error) {
	n := batchElements(msg, maxBatch, nil)
	if n == 0 || n > maxBatch {
		return nil, errBadBatch
	}
	elems := make([][]byte, 0, n)
	batchElements(msg, maxBatch, func(e []byte) { elems = append(elems, e) })
	for _, e := range elems {
		if e[0] != '{' {
			return nil, errBadBatch
		}
	}
	return elems, nil
}

// isBatch reports whether msg (trimmed JSON text) is a JSON array.
func isBatch(msg []byte) bool { return len(msg) > 0 && msg[0] == '[' }
