package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// sensitiveKeys are substrings of argument names whose values never reach the audit stream.
var sensitiveKeys = []string{
	"password", "passwd", "passphrase", "secret", "token", "authorization", "api_key", "apikey",
	"api-key", "cookie", "credential", "private_key", "privatekey", "access_key", "client_key",
}

func sensitiveKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range sensitiveKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// redactor removes secrets from audit events: every known secret value (redact.Values: the
// configuration's secrets) wherever it appears, and the values of sensitive keys in JSON.
type redactor struct{ redact.Values }

func newRedactor(secrets []string) redactor { return redactor{redact.New(secrets...)} }

// clean reports whether raw holds neither a sensitive key name nor a known secret value: then
// it needs no redaction (the common case, checked without decoding). It never misses a key
// that sensitiveKey would flag once decoded: text that could spell an ASCII letter otherwise
// than as itself (a \u escape of one, or İ and K, which lower-case to i and k) is not clean.
func (r redactor) clean(raw []byte) bool {
	return !mayHideLetters(raw) && !holdsSensitiveKey(raw) && !r.In(raw)
}

// lowerASCII maps a byte to itself with ASCII capitals lower-cased.
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		t[i] = c
	}
	return t
}()

// sensitiveByFirst lists the sensitive keys by their first letter; sensitiveSecond has, for a
// first letter, a bit per second letter (a = bit 0) that some key goes on with.
var sensitiveByFirst, sensitiveSecond = func() (keys [256][]string, second [256]uint32) {
	for _, k := range sensitiveKeys {
		keys[k[0]] = append(keys[k[0]], k)
		second[k[0]] |= 1 << (k[1] - 'a')
	}
	return keys, second
}()

// holdsSensitiveKey reports whether raw holds one of sensitiveKeys, ASCII letters in any case,
// in one pass over raw (the hot path of every audited result): a position is compared with
// the keys only when its first two letters begin one.
func holdsSensitiveKey(raw []byte) bool {
	for i := 0; i+1 < len(raw); i++ {
		c := lowerASCII[raw[i]]
		m := sensitiveSecond[c]
		if m == 0 {
			continue
		}
		if d := lowerASCII[raw[i+1]] - 'a'; d >= 26 || m&(1<<d) == 0 {
			continue
		}
		for _, k := range sensitiveByFirst[c] {
			if len(raw)-i >= len(k) && lowerASCIIEqual(raw[i:i+len(k)], k) {
				return true
			}
		}
	}
	return false
}

// lowerASCIIEqual reports whether b, with ASCII capitals lower-cased, equals the lower-case k.
func lowerASCIIEqual(b []byte, k string) bool {
	for j := range len(k) {
		if lowerASCII[b[j]] != k[j] {
			return false
		}
	}
	return true
}

// mayHideLetters reports whether JSON text may spell an ASCII letter otherwise than as the
// letter itself: an escape of one (see redact.EscapesASCII), or a character that lower-cases to
// one (U+0130 İ, U+212A Kelvin sign), as is or escaped.
func mayHideLetters(raw []byte) bool {
	if redact.EscapesASCII(raw) {
		return true
	}
	for _, s := range []string{"\u0130", "\u212a", `\u0130`, `\u212a`, `\u212A`} {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	return false
}

// JSON returns raw with sensitive keys' values and secret values replaced, capped to max bytes.
// A capped document becomes a JSON string holding the start of the redacted text, and
// truncated is true. Invalid JSON is kept as a (redacted, capped) JSON string.
func (r redactor) JSON(raw []byte, max int) (out json.RawMessage, truncated bool) {
	return r.json(raw, max, false)
}

// json is JSON; valid says raw is known to be valid JSON already (not checked again).
//
// A payload over max is redacted as it is read, only as far as the kept start needs
// (redactPrefix): its cost follows max, not the payload's size (decoding, walking and encoding
// a 4 MiB result whole cost ~180 ms and ~100 MB). Redacting just the kept start as text missed
// sensitive keys with array values, keys and values spelled with escapes, and secrets that JSON
// escapes. A payload within max that may hold something to redact is decoded, walked and
// encoded again, as is one that is not UTF-8 (encoding/json takes invalid bytes in strings, and
// they would reach the audit stream as they came; encoded again, they are U+FFFD). Text that is
// not a JSON document is redacted as JSON as far as it is (redactPrefix: its start, truncated),
// and as text (redactText) when it is not JSON from its start.
func (r redactor) json(raw []byte, max int, valid bool) (out json.RawMessage, truncated bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	var text []byte
	switch {
	case len(raw) > max:
		var ok bool
		if text, ok = r.redactPrefix(raw, max); !ok {
			// Not JSON from its start: as text, from a bounded start (without the start of a
			// value cut there: not whole, it would not be found, and what comes before it
			// may shrink once redacted to let it within the cap).
			start := raw[:cutRune(raw, min(len(raw), 4*max))]
			if len(start) < len(raw) {
				start = start[:r.PartialEnd(string(start))]
			}
			text = r.redactText(start)
		}
		truncated = true
	case r.clean(raw) && (valid || json.Valid(raw)) && utf8.Valid(raw):
		// (Not UTF-8, it is decoded and encoded again below: invalid bytes become U+FFFD, and
		// the event stays JSON text a strict reader takes. encoding/json takes such bytes.)
		return raw, false
	default:
		if doc, err := redact.Decode(raw); err == nil {
			if enc, err := redact.Encode(r.Walk(doc, sensitiveKey)); err == nil {
				if len(enc) <= max {
					return enc, false
				}
				text = enc
			}
		}
		if text == nil {
			// Not a JSON document: redacted as one as far as it is one (redactPrefix; the
			// text's key/value pattern misses a sensitive key's array value, or one that is
			// not JSON), the rest left out; as text only when it is not JSON from its start.
			var ok bool
			if text, ok = r.redactPrefix(raw, max); ok {
				truncated = true
			} else {
				text = r.redactText(raw)
			}
		}
	}
	if len(text) > max {
		text = text[:cutRune(text, max)]
		truncated = true
	}
	s, _ := json.Marshal(string(text))
	return s, truncated
}

// redactPrefix returns the start of the JSON document raw, redacted as Walk redacts a decoded
// document (the values of sensitive keys replaced, unless objects; configured secrets replaced
// in strings and keys) and encoded compactly in the document's own order, once more than max
// bytes of it are written or raw ends (a document cut short, or invalid past some point, gives
// what came before). It decodes at most the first 8×max bytes of raw: a token that goes on past
// them (one huge string, typically) is shown as text, redacted as text, unless a sensitive key's.
// ok is false when raw is not JSON from its start.
func (r redactor) redactPrefix(raw []byte, max int) (out []byte, ok bool) {
	in := raw[:cutRune(raw, min(len(raw), 8*max))]
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var b bytes.Buffer
	str := func(s string) {
		enc, _ := redact.Encode(r.String(s))
		b.Write(enc)
	}
	type frame struct {
		obj     bool
		n       int  // members or elements written
		wantKey bool // in an object: the next string is a key
		hide    bool // the value coming is a sensitive key's
	}
	var stack []frame
	tokens := 0
	for b.Len() <= max {
		tok, err := dec.Token()
		if err != nil {
			// (A syntax error is text that is not JSON past some point, not a token cut where
			// the bytes decoded stop: the rest is left out, keys and all, as when raw is whole.)
			var syntax *json.SyntaxError
			if tokens > 0 && len(in) < len(raw) && !errors.As(err, &syntax) && (len(stack) == 0 || !stack[len(stack)-1].hide) {
				// The bytes decoded stop inside a token: the rest of them, as text (as much as
				// the cap can keep, and as much again, so that a secret starting in what is
				// kept is replaced whole).
				// It is inside one token (the text of a string, typically), so there is no key
				// to look for in it, as Walk looks for none inside a string: secrets only.
				// The start of a value cut where the rest is cut is left out (not whole, it
				// would not be found; what comes before it may shrink once redacted).
				rest := in[dec.InputOffset():]
				if t := bytes.TrimLeft(rest, " \t\r\n"); len(t) > 0 && (t[0] == '-' || '0' <= t[0] && t[0] <= '9') {
					// A number not ended yet (after its '.', 'e', 'e+' or '-'): not whole, as
					// one the decoder ends where the bytes do (below), it is left out.
					break
				}
				rest = rest[:cutRune(rest, min(len(rest), 2*max))]
				rest = rest[:r.PartialEnd(string(rest))]
				if mayHideLetters(rest) {
					str(redact.Placeholder)
				} else {
					b.WriteString(r.Text(string(rest)))
				}
			}
			break
		}
		tokens++
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, isDelim := tok.(json.Delim); isDelim && (d == '}' || d == ']') {
			b.WriteByte(byte(d))
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				p := &stack[len(stack)-1]
				p.n++
				p.wantKey = p.obj
			}
			continue
		}
		if top != nil && top.obj && top.wantKey {
			key, _ := tok.(string)
			if top.n > 0 {
				b.WriteByte(',')
			}
			str(key)
			b.WriteByte(':')
			top.wantKey, top.hide = false, sensitiveKey(key)
			continue
		}
		if top != nil && !top.obj && top.n > 0 {
			b.WriteByte(',')
		}
		hide := top != nil && top.hide
		if top != nil {
			top.hide = false
		}
		switch v := tok.(type) {
		case json.Delim: // '{' or '['
			if v == '[' && hide {
				// A sensitive key's array goes whole, as Walk replaces it.
				cut := false
				for depth := 1; depth > 0 && !cut; {
					t, err := dec.Token()
					if err != nil {
						cut = true
						break
					}
					if d, ok := t.(json.Delim); ok {
						depth += map[json.Delim]int{'[': 1, '{': 1, ']': -1, '}': -1}[d]
					}
				}
				str(redact.Placeholder)
				if cut {
					// It goes on past the bytes decoded (or is not JSON past some point): all
					// that is left of them is the array's, an element cut in two included, and
					// none of it is kept as text.
					return b.Bytes(), true
				}
				break
			}
			b.WriteByte(byte(v))
			stack = append(stack, frame{obj: v == '{', wantKey: v == '{'})
			continue
		case string:
			if hide {
				v = redact.Placeholder
			}
			str(v)
		default: // json.Number, bool, nil
			n, isNum := v.(json.Number)
			if isNum && dec.InputOffset() == int64(len(in)) && (len(in) < len(raw) && strings.IndexByte("0123456789.eE+-", raw[len(in)]) >= 0 || len(in) == len(raw) && len(stack) > 0) {
				// A number the bytes decoded stop inside of (or a document cut short ends
				// with) may be the start of a longer one (the decoder ends it where they end):
				// not whole, it would not be found a value's; it is left out, as a string cut
				// there is.
				return b.Bytes(), true
			}
			if hide || isNum && r.Number(string(n)) {
				// A secret made of digits may be spelled as a number (in exponent form too:
				// redact.Values.Number): it goes whole, as in Walk.
				str(redact.Placeholder)
				break
			}
			enc, _ := json.Marshal(v)
			b.Write(enc)
		}
		if top != nil {
			top.n++
			top.wantKey = top.obj
		}
	}
	if tokens == 0 {
		return nil, false
	}
	return b.Bytes(), true
}

// redactText redacts text that cannot be decoded as JSON: the values of sensitive keys, and
// secret values in every spelling encoding/json gives them. Text that may spell a letter
// otherwise (see mayHideLetters) could hide either from that search: none of it is kept.
func (r redactor) redactText(raw []byte) []byte {
	if mayHideLetters(raw) {
		return []byte(redact.Placeholder + " (text that could spell a secret with escapes)")
	}
	return []byte(r.Text(redactKeysText(string(raw))))
}

// keyColonRe matches a "key": in JSON text; valueRe a value after it that redactKeysText
// replaces whole: a string (possibly cut at the end), or a number or literal that ends where
// the text or a JSON delimiter does.
var (
	keyColonRe = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"(\s*:\s*)`)
	valueRe    = regexp.MustCompile(`^(?:"(?:[^"\\]|\\.)*"|"(?:[^"\\]|\\.)*$|(?:[-+0-9.eE]+|true|false|null)(?:$|[\s,}\]]))`)
)

// redactKeysText replaces the values of sensitive keys in (possibly cut) JSON text. An object
// is walked (as Walk walks one); any other value it cannot take whole (an array, text that is
// not JSON) is where the text is cut: none of what follows is kept.
func redactKeysText(text string) string {
	var b strings.Builder
	for {
		loc := keyColonRe.FindStringSubmatchIndex(text)
		if loc == nil {
			b.WriteString(text)
			return b.String()
		}
		rest := text[loc[1]:]
		if !sensitiveKey(text[loc[2]:loc[3]]) || strings.HasPrefix(rest, "{") {
			b.WriteString(text[:loc[1]])
			text = rest
			continue
		}
		b.WriteString(text[:loc[1]])
		b.WriteString(`"` + redact.Placeholder + `"`)
		v := valueRe.FindString(rest)
		if v == "" {
			return b.String()
		}
		if last := v[len(v)-1]; v[0] != '"' && (last == ',' || last == '}' || last == ']' || last == ' ' || last == '\t' || last == '\n' || last == '\r') {
			v = v[:len(v)-1] // (the delimiter after a number or literal is kept)
		}
		text = rest[len(v):]
	}
}

func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:cutRune([]byte(s), n)]
}

// cutRune returns the largest n' ≤ n that does not split a UTF-8 sequence of b.
func cutRune(b []byte, n int) int {
	for n > 0 && n < len(b) && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:cutRune([]byte(s), n)] + "…"
}

// Audit events are published asynchronously (an event never holds up a call) and at least
// once: a publish that fails, or is not acknowledged within auditAckWait, is queued and published
// again, in order, with backoff, until it is stored. Events are dropped only when the queue is full
// (auditRetryQueue events) or when a stopping executor cannot store them within auditFlushWait;
// each drop is logged at error level and counted (Stats.AuditDropped). A publish that timed out
// may have been stored after all: its event may then appear twice (same content).
const (
	auditAckWait    = 10 * time.Second
	auditRetryQueue = 16384
	auditRetryMin   = 50 * time.Millisecond
	auditRetryMax   = 5 * time.Second
	auditFlushWait  = 5 * time.Second
)

// auditor publishes audit events.
type auditor struct {
	nc     *nats.Conn
	js     jetstream.JetStream // its own context: its failed publishes, and only those, are retried
	redact redactor
	max    int
	log    zerolog.Logger

	retry     chan *nats.Msg // events whose publish failed, to publish again
	flushWait time.Duration  // auditFlushWait
	failed    atomic.Int64   // publishes that failed or were not acknowledged in time
	dropped   atomic.Int64   // events given up
}

func newAuditor(nc *nats.Conn, redact redactor, max int, log zerolog.Logger) (*auditor, error) {
	a := &auditor{nc: nc, redact: redact, max: max, log: log, retry: make(chan *nats.Msg, auditRetryQueue), flushWait: auditFlushWait}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncTimeout(auditAckWait),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { a.requeue(m, err) }))
	if err != nil {
		return nil, err
	}
	a.js = js
	return a, nil
}

// emit publishes ev on subjects.Audit(tenant, name), redacting its message.
func (a *auditor) emit(name string, ev subjects.AuditEvent) {
	a.emitOn(subjects.Audit(ev.Tenant, name), name, ev)
}

// emitOn is emit on subject.
func (a *auditor) emitOn(subject, name string, ev subjects.AuditEvent) {
	ev.V = subjects.Version
	ev.Type = auditType(name)
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	// (StringCut: a message may quote words cut to size before it got here, truncateString's
	// "…" where they were cut, and the start of a value that straddled the cut is redacted too.)
	ev.Message = a.redact.StringCut(ev.Message, "…")
	capAudit(&ev)
	a.redactFields(&ev)
	data, err := encodeAudit(ev)
	if err == nil && len(data) > a.maxEvent() {
		// Bigger than NATS takes (fields JSON escapes to six times their size): without its
		// arguments and result (their sizes stay), which is what can still be that big.
		ev.Arguments, ev.Result, ev.Truncated = nil, nil, true
		data, err = encodeAudit(ev)
		if err == nil && len(data) > a.maxEvent() {
			err = fmt.Errorf("%d bytes even without arguments and result; NATS takes %d", len(data), a.maxEvent())
		}
	}
	if err != nil {
		a.dropped.Add(1)
		a.log.Error().Err(err).Str("call", truncateString(ev.CallID, 300)).Str("type", ev.Type).Msg("audit event dropped: cannot encode it")
		return
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(subjects.HeaderEventType, ev.Type)
	if _, err := a.js.PublishMsgAsync(msg); err != nil {
		a.requeue(msg, err)
	}
}

// redactFields replaces the configured secret values in the event's other fields of words a
// caller chose (its call id, tool, user and roles) or a listing named (the server), once
// capAudit cut them (so what is redacted is bounded; StringCut: the start of a value left
// just before a cut's "…" goes too). The call's keys (the results subject, Nats-Msg-Id) keep
// the id as sent: the event carries a redacted copy, which still names the call by what is left
// of its id. The tenant is the subject's token and stays.
func (a *auditor) redactFields(ev *subjects.AuditEvent) {
	if a.redact.Empty() {
		return
	}
	for _, s := range []*string{&ev.CallID, &ev.Tool, &ev.Server, &ev.User} {
		*s = a.redact.StringCut(*s, "…")
	}
	for i, r := range ev.Roles {
		if red := a.redact.StringCut(r, "…"); red != r {
			roles := slices.Clone(ev.Roles) // (not in place: the slice is the request's)
			roles[i] = red
			for j := i + 1; j < len(roles); j++ {
				roles[j] = a.redact.StringCut(roles[j], "…")
			}
			ev.Roles = roles
			break
		}
	}
}

// logText is a caller's words for a log line (a call id, a reply subject): cut to 300 bytes
// and redacted of the configured secret values, as audit events are.
func (e *Executor) logText(s string) string {
	return e.audit.redact.StringCut(truncateString(s, 300), "…")
}

// logRedacted is text that may quote a caller's words (an error, a subject) for a log line,
// redacted of the configured secret values.
func (e *Executor) logRedacted(s string) string { return e.audit.redact.StringCut(s, "…") }

// auditType is the Type of an audit event called name: "audit." + name, without building the
// string for the names the executor emits on every call.
func auditType(name string) string {
	switch name {
	case subjects.AuditRequest:
		return "audit." + subjects.AuditRequest
	case subjects.AuditDecision:
		return "audit." + subjects.AuditDecision
	case subjects.AuditDispatch:
		return "audit." + subjects.AuditDispatch
	case subjects.AuditResult:
		return "audit." + subjects.AuditResult
	}
	return "audit." + name
}

// Caps of an audit event's own fields (its arguments and result have the auditor's max): a
// principal or message past them is cut and the event marked truncated. Requests past the
// principal's limits (subjects.Principal.Check) are refused, but their request and decision
// events still carry what was sent.
const (
	auditMaxUser    = subjects.MaxUserBytes
	auditMaxRoles   = subjects.MaxRoles
	auditMaxRole    = subjects.MaxRoleBytes
	auditMaxMessage = 8 << 10
	auditMaxTool    = 4 << 10
)

// capAudit cuts ev's own fields to the caps above.
func capAudit(ev *subjects.AuditEvent) {
	cut := func(s *string, n int) {
		if len(*s) > n {
			*s, ev.Truncated = truncateString(*s, n), true
		}
	}
	cut(&ev.User, auditMaxUser)
	cut(&ev.Tool, auditMaxTool)
	cut(&ev.Server, auditMaxTool)
	cut(&ev.Message, auditMaxMessage)
	if len(ev.Roles) > auditMaxRoles {
		ev.Roles, ev.Truncated = ev.Roles[:auditMaxRoles:auditMaxRoles], true
	}
	if slices.ContainsFunc(ev.Roles, func(r string) bool { return len(r) > auditMaxRole }) {
		roles := make([]string, len(ev.Roles)) // not in place: the slice is the request's
		for i, r := range ev.Roles {
			roles[i] = truncateString(r, auditMaxRole)
		}
		ev.Roles, ev.Truncated = roles, true
	}
}

// maxEvent is the largest audit event the NATS server and the audit stream take, with room
// for the headers.
func (a *auditor) maxEvent() int {
	limit := subjects.MaxEventBytes
	if mp := int(a.nc.MaxPayload()); mp > 0 {
		limit = min(limit, mp)
	}
	return limit - 4<<10
}

// requeue queues an event whose publish failed, to publish it again.
func (a *auditor) requeue(m *nats.Msg, err error) {
	a.failed.Add(1)
	select {
	case a.retry <- m:
		a.log.Warn().Err(err).Str("subject", a.logSubject(m)).Msg("audit event not stored yet; publishing it again")
	default:
		a.dropped.Add(1)
		a.log.Error().Err(err).Str("subject", a.logSubject(m)).Msg("audit event dropped: the retry queue is full")
	}
}

// logSubject is m's subject for a log line, redacted of the configured secret values: its
// tenant token is the caller's words (as the executor's other log lines quote them, see
// Executor.logRedacted).
func (a *auditor) logSubject(m *nats.Msg) string { return a.redact.StringCut(m.Subject, "…") }

// republish publishes the queued events again until ctx is done, then for at most
// auditFlushWait more (the executor is stopping); what is still queued then is dropped.
func (a *auditor) republish(ctx context.Context) {
	for {
		select {
		case m := <-a.retry:
			if !a.publishUntilStored(ctx, m) {
				a.flush(m)
				return
			}
		case <-ctx.Done():
			a.flush(nil)
			return
		}
	}
}

// publishUntilStored publishes m, with backoff between attempts, until it is stored (true) or
// ctx is done (false).
func (a *auditor) publishUntilStored(ctx context.Context, m *nats.Msg) bool {
	wait := auditRetryMin
	for {
		pctx, cancel := context.WithTimeout(ctx, auditAckWait)
		_, err := a.js.PublishMsg(pctx, m)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, nats.ErrMaxPayload) {
			// It never will be (emit cuts events to fit, so this is a server whose limit
			// went down): given up at once, not retried ahead of every event behind it.
			a.dropped.Add(1)
			a.log.Error().Err(err).Str("subject", a.logSubject(m)).Int("bytes", len(m.Data)).Msg("audit event dropped: larger than the NATS server takes")
			return true
		}
		a.log.Debug().Err(err).Str("subject", a.logSubject(m)).Dur("retryIn", wait).Msg("audit event publish")
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, auditRetryMax)
	}
}

// flush publishes first (if any) and the queued events for at most auditFlushWait, and counts
// and logs what it could not store.
func (a *auditor) flush(first *nats.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), a.flushWait)
	defer cancel()
	lost := 0
	try := func(m *nats.Msg) {
		if ctx.Err() != nil || !a.publishUntilStored(ctx, m) {
			lost++
		}
	}
	if first != nil {
		try(first)
	}
	for len(a.retry) > 0 { // this goroutine is the only reader
		try(<-a.retry)
	}
	if lost > 0 {
		a.dropped.Add(int64(lost))
		a.log.Error().Int("events", lost).Msg("audit events dropped: not stored before the executor stopped")
	}
}

// pending is the number of audit events published but not yet acknowledged, or queued again.
func (a *auditor) pending() int { return a.js.PublishAsyncPending() + len(a.retry) }

// payload fills the capped, redacted arguments or result of an event.
func (a *auditor) payload(raw []byte) (json.RawMessage, int, bool) {
	out, trunc := a.redact.JSON(raw, a.max)
	return out, len(raw), trunc
}

// resultPayload is payload for a tools/call result, which the worker checked is a valid JSON
// object (isJSONObject) before it became the call's result: not validated again.
func (a *auditor) resultPayload(raw []byte) (json.RawMessage, int, bool) {
	out, trunc := a.redact.json(raw, a.max, true)
	return out, len(raw), trunc
}
