package executor

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/jsonscan"
	"github.com/mcpstream/mcpstream/subjects"
)

// Every call's answer and its audit events are encoded by hand: the same bytes as json.Marshal
// (TestEncodersMatchMarshal; TestEncodedFields fails when subjects adds a field that these do
// not write), without its reflection, which cost ~3 µs per answer or event, five times per
// call. A value json.Marshal would refuse (a time outside years 0–9999) goes to json.Marshal,
// for its error.

// encodeResult encodes res like json.Marshal, without re-validating its raw MCP result (checked
// once when it came from the connector, or decoded from a stored answer): results can be large.
// The result goes last.
func encodeResult(res subjects.CallResult) ([]byte, error) {
	out := make([]byte, 0, 256+len(res.ID)+len(res.Tool)+len(res.Result))
	out, ok := appendResult(out, &res)
	if !ok {
		return marshalResult(res)
	}
	return out, nil
}

// appendResult appends res encoded as encodeResult does; false when json.Marshal is needed.
func appendResult(b []byte, res *subjects.CallResult) ([]byte, bool) {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(res.V), 10)
	b = append(b, `,"id":`...)
	b = appendJSONString(b, res.ID)
	b = append(b, `,"tenant":`...)
	b = appendJSONString(b, res.Tenant)
	b = append(b, `,"tool":`...)
	b = appendJSONString(b, res.Tool)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, res.Status)
	if e := res.Error; e != nil {
		b = append(b, `,"error":{"code":`...)
		b = appendJSONString(b, e.Code)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, e.Message)
		if e.Path != "" {
			b = append(b, `,"path":`...)
			b = appendJSONString(b, e.Path)
		}
		if e.RetryAfterMs != 0 {
			b = append(b, `,"retryAfterMs":`...)
			b = strconv.AppendInt(b, e.RetryAfterMs, 10)
		}
		if e.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, e.Reason)
		}
		b = append(b, '}')
	}
	if res.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(res.Attempts), 10)
	}
	if res.Duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	var ok bool
	if !res.StartedAt.IsZero() {
		b = append(b, `,"startedAt":`...)
		if b, ok = appendJSONTime(b, res.StartedAt); !ok {
			return b, false
		}
	}
	if !res.FinishedAt.IsZero() {
		b = append(b, `,"finishedAt":`...)
		if b, ok = appendJSONTime(b, res.FinishedAt); !ok {
			return b, false
		}
	}
	if len(res.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, res.Result...)
	}
	return append(b, '}'), true
}

// marshalResult is encodeResult by json.Marshal.
func marshalResult(res subjects.CallResult) ([]byte, error) {
	raw := res.Result
	res.Result = nil
	b, err := json.Marshal(res)
	if err != nil || len(raw) == 0 {
		return b, err
	}
	out := make([]byte, 0, len(b)+len(raw)+len(`,"result":`))
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"result":`...)
	out = append(out, raw...)
	return append(out, '}'), nil
}

// encodeAudit encodes ev like json.Marshal, splicing in its arguments and result as they are
// (last): both come from payload (valid JSON, already redacted and capped), so they are not
// compacted and re-validated a second time.
func encodeAudit(ev subjects.AuditEvent) ([]byte, error) {
	b := make([]byte, 0, 256+len(ev.CallID)+len(ev.Message)+len(ev.Arguments)+len(ev.Result))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(ev.V), 10)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, ev.Type)
	b = append(b, `,"callId":`...)
	b = appendJSONString(b, ev.CallID)
	b = append(b, `,"tenant":`...)
	b = appendJSONString(b, ev.Tenant)
	b = appendOptString(b, `,"user":`, ev.User)
	if len(ev.Roles) > 0 {
		b = append(b, `,"roles":[`...)
		for i, r := range ev.Roles {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, r)
		}
		b = append(b, ']')
	}
	b = appendOptString(b, `,"tool":`, ev.Tool)
	b = appendOptString(b, `,"server":`, ev.Server)
	b = appendOptString(b, `,"decision":`, ev.Decision)
	b = appendOptString(b, `,"code":`, ev.Code)
	b = appendOptString(b, `,"message":`, ev.Message)
	if ev.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if ev.ArgBytes != 0 {
		b = append(b, `,"argBytes":`...)
		b = strconv.AppendInt(b, int64(ev.ArgBytes), 10)
	}
	if ev.ResBytes != 0 {
		b = append(b, `,"resultBytes":`...)
		b = strconv.AppendInt(b, int64(ev.ResBytes), 10)
	}
	if ev.IsError {
		b = append(b, `,"isError":true`...)
	}
	b = append(b, `,"at":`...)
	b, ok := appendJSONTime(b, ev.At)
	if !ok {
		return marshalAudit(ev)
	}
	if len(ev.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, ev.Arguments...)
	}
	if len(ev.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, ev.Result...)
	}
	return append(b, '}'), nil
}

// marshalAudit is encodeAudit by json.Marshal.
func marshalAudit(ev subjects.AuditEvent) ([]byte, error) {
	args, res := ev.Arguments, ev.Result
	ev.Arguments, ev.Result = nil, nil
	b, err := json.Marshal(ev)
	if err != nil || len(args) == 0 && len(res) == 0 {
		return b, err
	}
	out := make([]byte, 0, len(b)+len(args)+len(res)+len(`,"arguments":,"result":`))
	out = append(out, b[:len(b)-1]...)
	if len(args) > 0 {
		out = append(out, `,"arguments":`...)
		out = append(out, args...)
	}
	if len(res) > 0 {
		out = append(out, `,"result":`...)
		out = append(out, res...)
	}
	return append(out, '}'), nil
}

// appendOptString appends the member name (with its comma and colon) and s, unless s is empty
// (omitempty).
func appendOptString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, name...), s)
}

// appendJSONTime appends t as json.Marshal does (time.Time.MarshalJSON: RFC 3339 with
// nanoseconds, quoted); false when it cannot (a year outside 0–9999).
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		return b, false
	}
	return append(out, '"'), true
}

// appendJSONString appends s as encoding/json encodes a string (HTML characters escaped,
// invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped): its appendString.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control characters, and < > &
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeResult decodes an answer as json.Unmarshal does into a subjects.CallResult. An answer as
// encodeResult writes it (known members, plain strings, no error) is read in one check of its
// bytes and one scan of its members: json.Unmarshal checked it, then decoded it scanning it a
// second time, ~10 µs of every call for its caller. Anything else goes to json.Unmarshal
// (TestDecodeResultMatches, FuzzDecodeResult).
func decodeResult(data []byte) (subjects.CallResult, error) {
	if res, ok := fastResult(data); ok {
		return res, nil
	}
	var res subjects.CallResult
	err := json.Unmarshal(data, &res)
	return res, err
}

// fastResult is decodeResult's one pass: false for an answer it does not read as json.Unmarshal
// would.
func fastResult(data []byte) (subjects.CallResult, bool) {
	var res subjects.CallResult
	if !json.Valid(data) {
		return res, false
	}
	ok := true
	plainString := func(v []byte) (string, bool) {
		if len(v) < 2 || v[0] != '"' {
			return "", false
		}
		s := v[1 : len(v)-1]
		if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
			return "", false
		}
		return string(s), true
	}
	integer := func(v []byte) (int, bool) {
		n, err := strconv.ParseInt(string(v), 10, 0)
		return int(n), err == nil
	}
	timeValue := func(v []byte, t *time.Time) bool {
		return len(v) > 0 && v[0] == '"' && t.UnmarshalJSON(v) == nil
	}
	scanned := jsonscan.Members(data, func(name, v []byte) {
		if !ok {
			return
		}
		switch string(name) {
		case `"v"`:
			res.V, ok = integer(v)
		case `"id"`:
			res.ID, ok = plainString(v)
		case `"tenant"`:
			res.Tenant, ok = plainString(v)
		case `"tool"`:
			res.Tool, ok = plainString(v)
		case `"status"`:
			res.Status, ok = plainString(v)
		case `"attempts"`:
			res.Attempts, ok = integer(v)
		case `"duplicate"`:
			switch string(v) {
			case "true":
				res.Duplicate = true
			case "false":
				res.Duplicate = false
			default:
				ok = false
			}
		case `"startedAt"`:
			ok = timeValue(v, &res.StartedAt)
		case `"finishedAt"`:
			ok = timeValue(v, &res.FinishedAt)
		case `"result"`:
			ok = len(v) > 0 && v[0] == '{'
			res.Result = bytes.Clone(v)
		default: // error (rare), a member of a newer version, a name spelled otherwise
			ok = false
		}
	})
	return res, ok && scanned
}
