package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// The mcp-go client type-asserts its transport for these optional behaviours (client.go,
// protocol.go). A wrapper must implement exactly those its inner transport implements.
var optionalInterfaces = map[string]reflect.Type{
	"BidirectionalInterface":   reflect.TypeFor[transport.BidirectionalInterface](),
	"HTTPConnection":           reflect.TypeFor[transport.HTTPConnection](),
	"SetConnectionLostHandler": reflect.TypeFor[interface{ SetConnectionLostHandler(func(error)) }](),
	"RequiresLegacyProtocol":   reflect.TypeFor[interface{ RequiresLegacyProtocol() bool }](),
}

func TestWrappersForwardOptionalInterfaces(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	stdio := transport.NewIO(pr, pw, nil)
	h, err := transport.NewStreamableHTTP("http://127.0.0.1:1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	sse, err := transport.NewSSE("http://127.0.0.1:1/sse")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		inner, outer transport.Interface
	}{
		{"stdio", stdio, &stdioWrap{base: base{inner: stdio}, stdio: stdio}},
		{"http", h, &httpWrap{base: base{inner: h}, http: h}},
		{"sse", sse, &sseWrap{base: base{inner: sse}, sse: sse}},
	} {
		for name, iface := range optionalInterfaces {
			in := reflect.TypeOf(tc.inner).Implements(iface)
			out := reflect.TypeOf(tc.outer).Implements(iface)
			if in != out {
				t.Errorf("%s: inner implements %s: %v, wrapper: %v", tc.name, name, in, out)
			}
		}
	}
}

func TestParsePage(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		items     int
		cursor    string
		ttl       int64 // -1: absent
		scope     string
		code      string
	}{
		{"plain", `{"tools":[{"name":"a"}],"nextCursor":"c2"}`, 1, "c2", -1, "", ""},
		{"hints", `{"tools":[],"ttlMs":1500,"cacheScope":"private"}`, 0, "", 1500, "private", ""},
		// MCP requires the item array: a result without it is no empty list (read so, {} wiped
		// every tool of the server from the catalog).
		{"missing list", `{"nextCursor":null}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"empty result", `{}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		// (older mcp-go servers write an empty list as null)
		{"null list", `{"tools":null}`, 0, "", -1, "", ""},
		{"other kind's list", `{"prompts":[]}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"list in another case", `{"Tools":[]}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"list a string", `{"tools":"x"}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"list an empty object", `{"tools":{}}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"bad ttl ignored", `{"tools":[],"ttlMs":"soon"}`, 0, "", -1, "", ""},
		{"ttl a numeric string", `{"tools":[],"ttlMs":"60000"}`, 0, "", -1, "", ""},
		{"null hints", `{"tools":[],"ttlMs":null,"cacheScope":null}`, 0, "", -1, "", ""},
		{"fractional ttl", `{"tools":[],"ttlMs":1500.9}`, 0, "", 1500, "", ""},
		{"huge ttl ignored", `{"tools":[],"ttlMs":1e300}`, 0, "", -1, "", ""},
		// A negative ttlMs is expired at once, as 0: read as absent, it made the list never
		// expire.
		{"negative ttl", `{"tools":[],"ttlMs":-1}`, 0, "", 0, "", ""},
		{"huge negative ttl", `{"tools":[],"ttlMs":-1e400}`, 0, "", 0, "", ""},
		// A cacheScope other than public (in any case) or absent is private: read as absent,
		// "Private" or an unknown scope made a private list visible to every principal.
		{"scope in another case", `{"tools":[],"cacheScope":"Private"}`, 0, "", -1, "private", ""},
		{"public in another case", `{"tools":[],"cacheScope":"PUBLIC"}`, 0, "", -1, "public", ""},
		{"unknown scope", `{"tools":[],"cacheScope":"shared"}`, 0, "", -1, "private", ""},
		{"empty scope", `{"tools":[],"cacheScope":""}`, 0, "", -1, "private", ""},
		{"scope not a string", `{"tools":[],"cacheScope":{"public":true}}`, 0, "", -1, "private", ""},
		{"unknown fields", `{"tools":[{"name":"a"}],"_meta":{"x":1},"resultType":"complete"}`, 1, "", -1, "", ""},
		{"not an object", `[1,2]`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"null", `null`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"list not array", `{"tools":{"name":"a"}}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"cursor not string", `{"tools":[],"nextCursor":7}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"cursor too long", `{"tools":[],"nextCursor":"` + strings.Repeat("c", maxCursorBytes+1) + `"}`, 0, "", -1, "", subjects.CodeMalformedResponse},
		{"strings and nesting", `{"tools":[{"name":"a,[b]\\\",{"},[1,[2,3]],{"x":[4,5]}, "c,d" ]}`, 4, "", -1, "", ""},
		{"too many items", `{"tools":[` + strings.TrimSuffix(strings.Repeat("{},", 11), ",") + `]}`, 0, "", -1, "", subjects.CodeSnapshotTooLarge},
		{"empty list", `{"tools":[ ]}`, 0, "", -1, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parsePage(subjects.KindTools, []byte(tc.raw), 10)
			if tc.code != "" {
				var coded *codedError
				if !errors.As(err, &coded) || coded.code != tc.code {
					t.Fatalf("err = %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.items) != tc.items || p.nextCursor != tc.cursor || p.scope != tc.scope {
				t.Errorf("got %d items, cursor %q, scope %q", len(p.items), p.nextCursor, p.scope)
			}
			if (tc.ttl < 0) != (p.ttlMs == nil) || p.ttlMs != nil && *p.ttlMs != tc.ttl {
				t.Errorf("ttl = %v, want %d", p.ttlMs, tc.ttl)
			}
		})
	}
}

func TestValidateItems(t *testing.T) {
	big := `{"name":"big","description":"` + strings.Repeat("x", 600) + `","inputSchema":{"type":"object"}}`
	for _, tc := range []struct {
		name string
		kind subjects.Kind
		item string
		code string // "" accepted
	}{
		{"tool", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}`, ""},
		{"root oneOf", subjects.KindTools, `{"name":"a","inputSchema":` + oneOfSchema + `}`, ""},
		{"no type", subjects.KindTools, `{"name":"a","inputSchema":{"properties":{}}}`, ""},
		{"boolean property schema", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object","properties":{"x":true}}}`, ""},
		{"odd name", subjects.KindTools, `{"name":"a.b/c d ü","inputSchema":{"type":"object"}}`, ""},
		{"not an object", subjects.KindTools, `"tool"`, subjects.CodeInvalidDefinition},
		{"no name", subjects.KindTools, `{"inputSchema":{"type":"object"}}`, subjects.CodeInvalidDefinition},
		{"name not string", subjects.KindTools, `{"name":5,"inputSchema":{"type":"object"}}`, subjects.CodeInvalidDefinition},
		{"control char", subjects.KindTools, `{"name":"a\u001b[31m","inputSchema":{"type":"object"}}`, subjects.CodeInvalidDefinition},
		{"no schema", subjects.KindTools, `{"name":"a"}`, subjects.CodeInvalidSchema},
		{"schema string", subjects.KindTools, `{"name":"a","inputSchema":"x"}`, subjects.CodeInvalidSchema},
		{"type array", subjects.KindTools, `{"name":"a","inputSchema":{"type":"array"}}`, subjects.CodeInvalidSchema},
		{"type number", subjects.KindTools, `{"name":"a","inputSchema":{"type":42}}`, subjects.CodeInvalidSchema},
		{"properties array", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object","properties":[1]}}`, subjects.CodeInvalidSchema},
		{"required not strings", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object","required":[1]}}`, subjects.CodeInvalidSchema},
		{"array output schema", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}`, ""},
		{"boolean output schema", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object"},"outputSchema":true}`, ""},
		{"bad output schema", subjects.KindTools, `{"name":"a","inputSchema":{"type":"object"},"outputSchema":"x"}`, subjects.CodeInvalidSchema},
		{"too large", subjects.KindTools, big, subjects.CodeDefinitionTooLarge},
		{"prompt", subjects.KindPrompts, `{"name":"p","arguments":[{"name":"who"}]}`, ""},
		{"prompt bad args", subjects.KindPrompts, `{"name":"p","arguments":{}}`, subjects.CodeInvalidDefinition},
		{"resource", subjects.KindResources, `{"name":"r","uri":"file:///x"}`, ""},
		{"resource without uri", subjects.KindResources, `{"name":"r"}`, subjects.CodeInvalidDefinition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, rej := validateItem(tc.kind, json.RawMessage(tc.item), 512)
			switch {
			case tc.code == "" && rej != nil:
				t.Errorf("rejected %+v", rej)
			case tc.code != "" && (rej == nil || rej.Code != tc.code):
				t.Errorf("rejection = %+v, want %s", rej, tc.code)
			}
		})
	}
}

func TestAccumulatorDuplicatesHintsAndBytes(t *testing.T) {
	a := newAccumulator(subjects.KindTools, 1<<10)
	ttl1, ttl2 := int64(5000), int64(800)
	a.addPage(page{items: []json.RawMessage{
		json.RawMessage("{ \"name\" : \"a\",\n \"inputSchema\": {\"type\":\"object\"}, \"description\":\"<b>&</b>\" }"),
		json.RawMessage(`{"name":"b","inputSchema":{"type":"object"}}`),
	}, ttlMs: &ttl1, scope: "public"})
	a.addPage(page{items: []json.RawMessage{
		json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"bad"}`),
	}, ttlMs: &ttl2, scope: "private"})
	a.addPage(page{}) // no hints
	l := a.l
	if l.Pages != 3 || len(l.Items) != 2 || *l.TTLMs != 800 || l.Scope != subjects.ScopePrivate {
		t.Fatalf("listing = %+v", l)
	}
	// Only whitespace goes: no re-encoding, no escaping.
	if want := `{"name":"a","inputSchema":{"type":"object"},"description":"<b>&</b>"}`; string(l.Items[0]) != want {
		t.Errorf("item = %s, want %s", l.Items[0], want)
	}
	codes := map[string]string{}
	for _, r := range l.Rejected {
		codes[r.Name] = r.Code
	}
	if codes["a"] != subjects.CodeDuplicateName || codes["bad"] != subjects.CodeInvalidSchema {
		t.Errorf("rejected = %+v", l.Rejected)
	}
	// The snapshot encoding keeps the item bytes too.
	data, err := encodeJSON(subjects.Snapshot{Items: l.Items})
	if err != nil || !bytes.Contains(data, l.Items[0]) {
		t.Errorf("encoded %s (%v)", data, err)
	}
}

func TestFingerprint(t *testing.T) {
	a := json.RawMessage(`{"name":"a"}`)
	b := json.RawMessage(`{"name":"b"}`)
	fp := func(scope string, items ...json.RawMessage) string {
		l := listing{Items: items, Scope: scope}
		return l.fingerprint()
	}
	if fp("", a, b) != fp("", b, a) {
		t.Error("order changes the fingerprint")
	}
	if fp("", a, b) == fp("", a) || fp("", a) == fp("private", a) {
		t.Error("content or scope does not change the fingerprint")
	}
	if got := fp("", a); len(got) != 64 {
		t.Errorf("fingerprint %q is not hex sha256", got)
	}
	l := listing{Items: []json.RawMessage{a}, Rejected: []subjects.Rejected{{Name: "x", Code: "invalid_schema"}}}
	if l.fingerprint() == fp("", a) {
		t.Error("rejections do not change the fingerprint")
	}
	// A new ttlMs is news (consumers keep the TTL of the snapshot they hold); a list without
	// one keeps the fingerprint it always had.
	ttl := func(ms int64) string {
		l := listing{Items: []json.RawMessage{a}, TTLMs: &ms}
		return l.fingerprint()
	}
	if ttl(60000) == ttl(3600000) || ttl(60000) == fp("", a) {
		t.Error("ttlMs does not change the fingerprint")
	}
	if got, want := fp("", a), "ec9faa51d06af3407870bcf43ca5a7c4c80391be154b83f2cd77ec4adb8dc66f"; got != want {
		t.Errorf("fingerprint of a list without ttlMs changed: %s, want %s (every server would publish again)", got, want)
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor(ServerConfig{
		URL:     "https://user:pa55word@example.com/mcp",
		Secrets: []string{"abc123", "abc123-long"},
		Headers: map[string]string{"Authorization": "Bearer tok-xyz", "Accept": "application/json"},
		Env:     map[string]string{"API_KEY": "envsecret", "HOME": "/home/x"},
	})
	in := "abc123-long abc123 tok-xyz Bearer tok-xyz envsecret pa55word application/json /home/x"
	got := r.String(in)
	for _, s := range []string{"abc123", "tok-xyz", "envsecret", "pa55word"} {
		if strings.Contains(got, s) {
			t.Errorf("%q survived in %q", s, got)
		}
	}
	if !strings.Contains(got, "application/json") || !strings.Contains(got, "/home/x") {
		t.Errorf("non-secrets were redacted: %q", got)
	}
	if newRedactor(ServerConfig{}).String(in) != in {
		t.Error("empty redactor changed text")
	}
	if got := printable("a\x1b[31mb\nc"); got != "a?[31mb?c" {
		t.Errorf("printable = %q", got)
	}
}

func TestEncodeDispatchReplyKeepsBytes(t *testing.T) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"<x>"}],  "isError":false}`)
	got := encodeDispatchReply(subjects.DispatchReply{V: 1, Result: raw})
	if want := `{"v":1,"result":` + string(raw) + `}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var r subjects.DispatchReply
	if err := json.Unmarshal(got, &r); err != nil || !bytes.Equal(r.Result, raw) {
		t.Errorf("round trip: %s (%v)", r.Result, err)
	}
	e := encodeDispatchReply(dispatchErr(subjects.CodeTimeout, "t", ""))
	if !bytes.Contains(e, []byte(`"code":"timeout"`)) {
		t.Errorf("error reply %s", e)
	}
}

// A snapshot over the event size limit is refused with snapshot_too_large, not published.
func TestSnapshotTooLarge(t *testing.T) {
	env := natstest.Start(t)
	m := New(env.JS, env.NC, fastConfig(), testLogger(t))
	c := newConnector(m, ServerConfig{Name: "big", URL: "http://127.0.0.1:1/mcp", Transport: TransportHTTP})
	item := json.RawMessage(`{"name":"x","description":"` + strings.Repeat("y", 200<<10) + `","inputSchema":{"type":"object"}}`)
	l := &listing{Kind: subjects.KindTools}
	for range 45 { // 45 × 200 KiB > 8 MiB
		l.Items = append(l.Items, item)
	}
	_, err := c.publishSnapshot(context.Background(), l, nil)
	var coded *codedError
	if !errors.As(err, &coded) || coded.code != subjects.CodeSnapshotTooLarge {
		t.Fatalf("err = %v, want snapshot_too_large", err)
	}
	if seq := lastSeq(t, env, subjects.RegistrySnapshot("big", subjects.KindTools)); seq != 0 {
		t.Errorf("a snapshot was stored (seq %d)", seq)
	}
	// A small one goes, once.
	small := &listing{Kind: subjects.KindTools, Items: []json.RawMessage{json.RawMessage(`{"name":"a"}`)}}
	r1, err := c.publishSnapshot(context.Background(), small, nil)
	if err != nil || !r1.published {
		t.Fatalf("publish: %+v %v", r1, err)
	}
	r2, err := c.publishSnapshot(context.Background(), small, nil)
	if err != nil || r2.published || r2.seq != r1.seq {
		t.Errorf("unchanged publish: %+v %v", r2, err)
	}
}

// TestRedactorJSON: a configured secret value in a result or definition is replaced wherever
// it appears (strings, keys; as is or JSON-escaped); a document without one is returned as is.
func TestRedactorJSON(t *testing.T) {
	r := newRedactor(ServerConfig{Secrets: []string{`k"e\y<1>`, "plain-secret-42"}})
	clean := []byte(`{"content":[{"type":"text","text":"nothing here <b>"}],"n":1.50}`)
	if out, changed := r.JSON(clean); changed || !bytes.Equal(out, clean) {
		t.Errorf("clean document changed: %s", out)
	}
	raw := []byte(`{"content":[{"type":"text","text":"token=k\"e\\y\u003c1\u003e and k\"e\\y<1>"}],` +
		`"structuredContent":{"plain-secret-42":"x plain-secret-42 y","n":1.50},"isError":true}`)
	out, changed := r.JSON(raw)
	if !changed || bytes.Contains(out, []byte("plain-secret-42")) || bytes.Contains(out, []byte(`e\\y`)) || !json.Valid(out) {
		t.Fatalf("redacted = %s (changed %v)", out, changed)
	}
	var doc struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured map[string]any `json:"structuredContent"`
		IsError    bool           `json:"isError"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Content[0].Text != "token=[redacted] and [redacted]" || doc.Structured["[redacted]"] != "x [redacted] y" || !doc.IsError {
		t.Errorf("redacted = %s", out)
	}
	if !bytes.Contains(out, []byte(`"n":1.50`)) {
		t.Errorf("numbers must keep their spelling: %s", out)
	}
	// Definitions in a listing.
	a := newAccumulator(subjects.KindTools, 1<<12)
	a.redact = r.JSON
	a.addPage(page{items: []json.RawMessage{
		json.RawMessage(`{"name":"leaky","description":"uses plain-secret-42","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"fine","inputSchema":{"type":"object"}}`),
	}})
	if a.l.Redacted != 1 || bytes.Contains(a.l.Items[0], []byte("plain-secret-42")) || string(a.l.Items[1]) != `{"name":"fine","inputSchema":{"type":"object"}}` {
		t.Errorf("listing = %d redacted, items %s", a.l.Redacted, a.l.Items)
	}
}
