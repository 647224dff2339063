package registrysync

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/subjects"
)

// maxNameBytes caps a definition's name (MCP suggests at most 128 characters for tools).
const maxNameBytes = 512

// maxCursorBytes caps a nextCursor: an opaque token, not a place for data.
const maxCursorBytes = 64 << 10

// maxReadFactor bounds the items' bytes one list reads, those left out included, at this many
// times what an event holds: items left out (a definition too large) take no room in the
// snapshot, but reading them is work.
const maxReadFactor = 4

// minItemBytes is the least one item of a list takes in a snapshot event, kept ({"name":"x"}
// and a comma) or rejected (more): a list of more than payload limit / minItemBytes items
// cannot be published, and is refused as it is counted, before any item is decoded.
const minItemBytes = 13

// listing is the complete list of one kind, over every page, ready to become a Snapshot.
type listing struct {
	Kind     subjects.Kind
	Items    []json.RawMessage // compacted server bytes, in server order
	Redacted int               // items that held a configured secret value (redacted)
	Rejected []subjects.Rejected
	Pages    int
	Bytes    int // about what Items and Rejected take in a snapshot event
	TTLMs    *int64
	Scope    string
	Auth     string // ServerConfig.AuthContext the list was made in
	// AfterSeq is the stream sequence of the last ListChanged of the kind the connector had
	// stored before the list began (0: none): the notifications the list answers.
	AfterSeq uint64
}

// page is one decoded list result. Items keep their exact bytes.
type page struct {
	items      []json.RawMessage
	nextCursor string
	ttlMs      *int64
	scope      string
}

// listKey is the result member holding the items of a kind.
func listKey(k subjects.Kind) string { return string(k) }

// parsePage decodes one raw list result tolerantly: unknown members are ignored, and a null item
// array is an empty page (Go servers built on mcp-go before it guarded against it write an
// empty list so), but a result that is not a JSON object, an item array that is missing (MCP
// requires it: read as an empty page, {} would have removed every item of the kind from the
// catalog) or not an array, or a cursor that is not a string or longer than maxCursorBytes is a
// malformed response. A page of more than maxItems items is snapshot_too_large, found before
// the items are decoded (a few MB of tiny items would otherwise take hundreds of MB).
func parsePage(kind subjects.Kind, raw []byte, maxItems int) (page, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return page{}, codedf(subjects.CodeMalformedResponse, "%s/list result is not a JSON object: %v", kind, err)
	}
	if fields == nil {
		return page{}, codedf(subjects.CodeMalformedResponse, "%s/list result is null", kind)
	}
	var p page
	v, ok := fields[listKey(kind)]
	if !ok {
		return page{}, codedf(subjects.CodeMalformedResponse, "%s/list result has no %q array, which MCP requires (an empty list is [])", kind, listKey(kind))
	}
	if n := countItems(v, 0, maxItems); n > maxItems {
		return page{}, codedf(subjects.CodeSnapshotTooLarge, "%s/list: a page of more than %d items, more than a snapshot can hold", kind, maxItems)
	}
	if err := json.Unmarshal(v, &p.items); err != nil {
		return page{}, codedf(subjects.CodeMalformedResponse, "%s/list result: %q is not an array", kind, listKey(kind))
	}
	if v, ok := fields["nextCursor"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &p.nextCursor); err != nil {
			return page{}, codedf(subjects.CodeMalformedResponse, "%s/list result: nextCursor is not a string", kind)
		}
		if len(p.nextCursor) > maxCursorBytes {
			return page{}, codedf(subjects.CodeMalformedResponse, "%s/list result: nextCursor is %d bytes, more than %d", kind, len(p.nextCursor), maxCursorBytes)
		}
	}
	// Cache hints are advisory: a bad value never fails the list (see pageTTL, pageScope).
	if v, ok := fields["ttlMs"]; ok && !isNull(v) {
		p.ttlMs = pageTTL(v)
	}
	if v, ok := fields["cacheScope"]; ok && !isNull(v) {
		p.scope = pageScope(v)
	}
	return p, nil
}

// pageTTL reads a page's ttlMs (not null): a fraction is cut to whole milliseconds; a negative
// number is 0, expired at once (read as absent, it made the list never expire); a value that is
// not a number, or past 2^53 (beyond any lifetime: nothing expires), is ignored (nil).
func pageTTL(v json.RawMessage) *int64 {
	var n json.Number
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] == '"' || json.Unmarshal(t, &n) != nil {
		return nil // not a number (json.Number would take "60000", a string)
	}
	ms := int64(0)
	if !strings.HasPrefix(string(n), "-") { // (-1e400 too, which is no float64)
		f, err := n.Float64()
		if err != nil || f > 1<<53 {
			return nil
		}
		ms = int64(f)
	}
	return &ms
}

// pageScope reads a page's cacheScope (not null): "public" or "private" in any case, and any
// other value (an unknown word, "", not a string) private: a list whose scope cannot be read
// must not be shown to every principal. An absent one is "" (public, MCP's default).
func pageScope(v json.RawMessage) string {
	var s string
	_ = json.Unmarshal(v, &s)
	if strings.EqualFold(s, subjects.ScopePublic) {
		return subjects.ScopePublic
	}
	return subjects.ScopePrivate
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// countItems counts the elements of the arrays at nesting depth `depth` of the valid JSON text
// raw (0: raw itself is the array; 1: the arrays that are members of the object raw), without
// decoding anything; it stops counting once past limit.
func countItems(raw []byte, depth, limit int) int {
	n, level := 0, -1 // level: nesting depth of the byte being read, inside its container
	var inArray bool  // the container at depth is an array
	for i := 0; i < len(raw) && n <= limit; i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			level++
			if level == depth {
				inArray = raw[i] == '['
				if rest := bytes.TrimLeft(raw[i+1:], " \t\r\n"); inArray && len(rest) > 0 && rest[0] != ']' {
					n++ // a first element
				}
			}
		case '}', ']':
			level--
		case ',':
			if level == depth && inArray {
				n++
			}
		}
	}
	return n
}

// accumulator builds a listing page by page, validating each item.
type accumulator struct {
	l        listing
	maxBytes int
	seen     map[string]bool
	// redact removes secret values from an item (nil: none configured).
	redact func([]byte) ([]byte, bool)
	// redactText removes secret values from the name and message of a rejected item (nil:
	// none configured): names and messages quote what the server sent.
	redactText func(string) string
}

// reject records a rejected item, redacted, then cut to size.
func (a *accumulator) reject(r subjects.Rejected) {
	if a.redactText != nil {
		r.Name, r.Message = a.redactText(r.Name), a.redactText(r.Message)
	}
	r.Name = truncate(r.Name, 200)
	a.l.Rejected = append(a.l.Rejected, r)
	a.l.Bytes += len(r.Name) + len(r.Code) + len(r.Message) + len(`{"name":"","code":"","message":""},`)
}

func newAccumulator(kind subjects.Kind, maxBytes int) *accumulator {
	return &accumulator{
		l:        listing{Kind: kind, Items: []json.RawMessage{}},
		maxBytes: maxBytes,
		seen:     map[string]bool{},
	}
}

func (a *accumulator) addPage(p page) {
	a.l.Pages++
	if p.ttlMs != nil && (a.l.TTLMs == nil || *p.ttlMs < *a.l.TTLMs) {
		ttl := *p.ttlMs
		a.l.TTLMs = &ttl
	}
	switch {
	case p.scope == subjects.ScopePrivate:
		a.l.Scope = subjects.ScopePrivate
	case p.scope == subjects.ScopePublic && a.l.Scope == "":
		a.l.Scope = subjects.ScopePublic
	}
	for _, item := range p.items {
		a.addItem(item)
	}
}

func (a *accumulator) addItem(item json.RawMessage) {
	name, key, rej := validateItem(a.l.Kind, item, a.maxBytes)
	if rej != nil {
		a.reject(*rej)
		return
	}
	if a.redactText != nil && a.redactText(key) != key {
		// Published redacted ("get_[redacted]"), the name would be one the server does not
		// know (its calls could only fail) and could equal another's: left out instead.
		what := "name"
		if a.l.Kind == subjects.KindResources {
			what = "uri"
		}
		a.reject(subjects.Rejected{
			Name: name, Code: subjects.CodeSecretInName,
			Message: fmt.Sprintf("its %s holds a configured secret value", what),
		})
		a.l.Redacted++
		return
	}
	if a.seen[key] {
		what := "name"
		if a.l.Kind == subjects.KindResources {
			what = "uri"
		}
		a.reject(subjects.Rejected{
			Name: name, Code: subjects.CodeDuplicateName,
			Message: fmt.Sprintf("a %s with this %s was listed before; the first one is kept", singular(a.l.Kind), what),
		})
		return
	}
	a.seen[key] = true
	var buf bytes.Buffer
	if err := json.Compact(&buf, item); err != nil { // validated above; cannot happen
		a.reject(subjects.Rejected{Name: name, Code: subjects.CodeInvalidDefinition, Message: err.Error()})
		return
	}
	item = buf.Bytes()
	if a.redact != nil {
		if out, changed := a.redact(item); changed {
			item = out
			a.l.Redacted++
		}
	}
	a.l.Items = append(a.l.Items, item)
	a.l.Bytes += len(item) + 1
}

func singular(k subjects.Kind) string { return strings.TrimSuffix(string(k), "s") }

// validateItem checks one definition. It returns the item's name, its identity key (the name,
// or the uri for resources) and a rejection when the item is refused.
func validateItem(kind subjects.Kind, item json.RawMessage, maxBytes int) (name, key string, rej *subjects.Rejected) {
	reject := func(code, format string, args ...any) (string, string, *subjects.Rejected) {
		return name, "", &subjects.Rejected{Name: name, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
		return reject(subjects.CodeInvalidDefinition, "a %s must be a JSON object", singular(kind))
	}
	if v, ok := fields["name"]; ok {
		_ = json.Unmarshal(v, &name)
	}
	if len(item) > maxBytes {
		return reject(subjects.CodeDefinitionTooLarge, "definition is %d bytes, more than the %d allowed", len(item), maxBytes)
	}
	if name == "" {
		return reject(subjects.CodeInvalidDefinition, "a %s needs a non-empty string name", singular(kind))
	}
	if msg := badName(name); msg != "" {
		return reject(subjects.CodeInvalidDefinition, "name %s", msg)
	}
	key = name
	switch kind {
	case subjects.KindTools:
		schema, ok := fields["inputSchema"]
		if !ok || isNull(schema) {
			return reject(subjects.CodeInvalidSchema, "inputSchema is missing")
		}
		if msg := checkObjectSchema(schema); msg != "" {
			return reject(subjects.CodeInvalidSchema, "inputSchema %s", msg)
		}
		// Since 2026-07-28 (SEP-2106) an outputSchema may be any JSON Schema: an object schema
		// of any type (array, string...) or a boolean schema; structuredContent any JSON value.
		if out, ok := fields["outputSchema"]; ok && !isNull(out) {
			var m map[string]json.RawMessage
			var b bool
			if json.Unmarshal(out, &m) != nil && json.Unmarshal(out, &b) != nil {
				return reject(subjects.CodeInvalidSchema, "outputSchema must be a JSON Schema (an object or a boolean)")
			}
		}
	case subjects.KindPrompts:
		if v, ok := fields["arguments"]; ok && !isNull(v) {
			var args []json.RawMessage
			if json.Unmarshal(v, &args) != nil {
				return reject(subjects.CodeInvalidDefinition, "arguments must be an array")
			}
		}
	case subjects.KindResources:
		var uri string
		if v, ok := fields["uri"]; ok {
			_ = json.Unmarshal(v, &uri)
		}
		if uri == "" {
			return reject(subjects.CodeInvalidDefinition, "a resource needs a non-empty string uri")
		}
		key = uri
	}
	return name, key, nil
}

// badName explains why a name is unusable ("" if it is fine). Any printable text is accepted
// (public names are encoded later); control characters and absurd lengths are not.
func badName(name string) string {
	if len(name) > maxNameBytes {
		return fmt.Sprintf("is %d bytes long, more than %d", len(name), maxNameBytes)
	}
	if !utf8.ValidString(name) {
		return "is not valid UTF-8"
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Sprintf("holds the control character %U", r)
		}
	}
	return ""
}

// checkObjectSchema checks the shape MCP requires of tool schemas: a JSON object whose "type",
// if present, is "object", with well-formed "properties" and "required" when present. Anything
// else in the schema (oneOf, $defs, $ref...) is kept as is and left to the validator.
func checkObjectSchema(schema json.RawMessage) string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(schema, &fields); err != nil || fields == nil {
		return "must be a JSON object"
	}
	if v, ok := fields["type"]; ok {
		var t string
		if json.Unmarshal(v, &t) != nil || t != "object" {
			return fmt.Sprintf(`has type %s; it must be "object"`, truncate(string(v), 40))
		}
	}
	if v, ok := fields["properties"]; ok {
		var props map[string]json.RawMessage
		if json.Unmarshal(v, &props) != nil || props == nil && !isNull(v) {
			return "has properties that are not an object"
		}
		for k, p := range props {
			var m map[string]json.RawMessage
			var b bool
			if json.Unmarshal(p, &m) != nil && json.Unmarshal(p, &b) != nil {
				return fmt.Sprintf("property %q is not a schema", truncate(k, 60))
			}
		}
	}
	if v, ok := fields["required"]; ok {
		var req []string
		if json.Unmarshal(v, &req) != nil {
			return "has required that is not an array of strings"
		}
	}
	return ""
}

// fingerprint identifies a listing's content: a hex SHA-256 over the items' bytes (as a sorted
// set of item hashes, so a server that reorders an unchanged list does not produce a new
// snapshot), the cache scope, the authorization context and the rejections.
func (l *listing) fingerprint() string {
	hashes := make([]string, len(l.Items))
	for i, it := range l.Items {
		s := sha256.Sum256(it)
		hashes[i] = hex.EncodeToString(s[:])
	}
	sort.Strings(hashes)
	h := sha256.New()
	h.Write([]byte("mcpstream.snapshot.v1\n"))
	for _, s := range hashes {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	h.Write([]byte("scope:" + l.Scope + "\n"))
	if l.Auth != "" {
		h.Write([]byte("auth:" + l.Auth + "\n"))
	}
	if l.TTLMs != nil {
		// Consumers keep the ttlMs of the snapshot they hold: a new one must be published.
		h.Write([]byte("ttl:" + strconv.FormatInt(*l.TTLMs, 10) + "\n"))
	}
	rej := make([]string, len(l.Rejected))
	for i, r := range l.Rejected {
		rej[i] = r.Name + "\x00" + r.Code + "\x00" + r.Message
	}
	sort.Strings(rej)
	for _, r := range rej {
		h.Write([]byte("rejected:" + r + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// codedError is an error with a stable code from subjects.
type codedError struct {
	code string
	msg  string
	nats bool // a NATS failure, not the server's
}

func (e *codedError) Error() string { return e.code + ": " + e.msg }

func codedf(code, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}
