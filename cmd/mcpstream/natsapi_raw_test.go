package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// README's NATS API as an integrator meets it: plain nats.go requests and JetStream publishes
// with the documented subjects, headers and JSON (no mcpstream package builds or reads them),
// against `up`.

// rawReply is a reply to a raw request: its data decoded into a map, and its headers.
type rawReply struct {
	Header nats.Header
	Data   []byte
	Body   map[string]any
}

func rawRequest(t *testing.T, nc *nats.Conn, subject, body string) rawReply {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 20*time.Second)
	if err != nil {
		t.Fatalf("request %s %s: %v", subject, body, err)
	}
	r := rawReply{Header: m.Header, Data: m.Data}
	if err := json.Unmarshal(m.Data, &r.Body); err != nil {
		t.Fatalf("reply to %s is not a JSON object: %v: %s", subject, err, m.Data)
	}
	return r
}

// errorCode is the reply's error.code ("" when it has none).
func (r rawReply) errorCode() string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r rawReply) str(name string) string { s, _ := r.Body[name].(string); return s }

// toolNames are the names of a search or details reply's tools.
func (r rawReply) toolNames() []string {
	var names []string
	tools, _ := r.Body["tools"].([]any)
	for _, x := range tools {
		m, _ := x.(map[string]any)
		n, _ := m["name"].(string)
		names = append(names, n)
	}
	return names
}

func rawConnect(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// TestRawNATSVersionZeroAndNoPrincipal: README's NATS API reads a request without "v" as
// version 1 and refuses any other version. "v":0 and "v":null are read as no "v" (version 1)
// by every service (the Go decoders cannot tell them apart); -1 and 2 are bad_request. A request
// without a principal, under the open policy, is local/local's: it finds what only local/local
// sees (the demo ticketing server's private list), which a named other user does not.
func TestRawNATSVersionZeroAndNoPrincipal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up with the demo servers")
	}
	p := startUp(t)
	p.waitDemoReady(t)
	nc, _ := rawConnect(t, p.nats)
	search := "mcpstream.v1.catalog.local.search"
	for _, v := range []string{`0`, `null`, `1`} {
		r := rawRequest(t, nc, search, `{"v":`+v+`,"query":"select:kb__get_document","detail":"name"}`)
		if r.errorCode() != "" || r.Header.Get("Nats-Service-Error-Code") != "" || r.str("ranking") != "select" {
			t.Errorf(`search with "v":%s: got %s (headers %v); want it served as version 1`, v, r.Data, r.Header)
		}
		r = rawRequest(t, nc, "mcpstream.v1.exec.local", `{"v":`+v+`,"id":"raw-v-`+v+`","tool":"kb__get_document","arguments":{"id":"POL-TRAVEL"}}`)
		if r.str("status") != "ok" {
			t.Errorf(`call with "v":%s: got %s; want it run as version 1`, v, r.Data)
		}
	}
	for _, v := range []string{`-1`, `2`} {
		r := rawRequest(t, nc, search, `{"v":`+v+`,"query":"refund"}`)
		if r.errorCode() != "bad_request" || r.Header.Get("Nats-Service-Error-Code") != "bad_request" {
			t.Errorf(`search with "v":%s: got %s (headers %v); want bad_request`, v, r.Data, r.Header)
		}
		r = rawRequest(t, nc, "mcpstream.v1.exec.local", `{"v":`+v+`,"id":"raw-bad-v`+v+`","tool":"kb__get_document","arguments":{"id":"POL-TRAVEL"}}`)
		if r.str("status") != "refused" || r.errorCode() != "bad_request" {
			t.Errorf(`call with "v":%s: got %s; want refused bad_request`, v, r.Data)
		}
	}

	// No principal: local/local, who alone sees the private ticketing list.
	r := rawRequest(t, nc, search, `{"v":1,"query":"select:ticketing__createIssue","detail":"name"}`)
	if got := r.toolNames(); len(got) != 1 || got[0] != "ticketing__createIssue" {
		t.Errorf("search without a principal: got %s; want ticketing__createIssue (local/local sees the private list)", r.Data)
	}
	r = rawRequest(t, nc, search, `{"v":1,"query":"select:ticketing__createIssue","detail":"name","principal":{"user":"bob"}}`)
	if got := r.toolNames(); len(got) != 0 {
		t.Errorf("search as bob: got %s; want nothing (the list is local/local's)", r.Data)
	}
}

// TestRawNATSAuditDispatchOnlySideEffecting: the audit stream's dispatch events
// (mcpstream.v1.audit.<tenant>.dispatch) are of calls to tools neither read-only nor idempotent
// only (the point after which a side effect's outcome may be unknown): a read-only call records
// request, decision and result, no dispatch.
func TestRawNATSAuditDispatchOnlySideEffecting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up with the demo servers")
	}
	p := startUp(t)
	p.waitDemoReady(t)
	nc, js := rawConnect(t, p.nats)
	exec := "mcpstream.v1.exec.local"
	if r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-ro","tool":"kb__get_document","arguments":{"id":"POL-TRAVEL"}}`); r.str("status") != "ok" {
		t.Fatalf("read-only call: %s", r.Data)
	}
	if r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-se","tool":"ticketing__createIssue","arguments":{"title":"t","body":"b","priority":"low"}}`); r.str("status") != "ok" {
		t.Fatalf("side-effecting call: %s", r.Data)
	}
	// Audit events of each call, by type, once both result events are stored.
	types := map[string][]string{}
	waitFor(t, "both calls' result events", 400, func() bool {
		clear(types)
		c, err := js.OrderedConsumer(t.Context(), "MCPSTREAM_AUDIT", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"mcpstream.v1.audit.local.>"}})
		if err != nil {
			return false
		}
		batch, err := c.FetchNoWait(100)
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			var ev struct {
				CallID string `json:"callId"`
			}
			json.Unmarshal(m.Data(), &ev)
			types[ev.CallID] = append(types[ev.CallID], m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:])
		}
		return strings.Contains(strings.Join(types["raw-ro"], ","), "result") && strings.Contains(strings.Join(types["raw-se"], ","), "result")
	})
	if got := strings.Join(types["raw-se"], ","); got != "request,decision,dispatch,result" {
		t.Errorf("audit events of the side-effecting call: %s; want request,decision,dispatch,result", got)
	}
	if got := strings.Join(types["raw-ro"], ","); got != "request,decision,result" {
		t.Errorf("audit events of the read-only call: %s; want request,decision,result", got)
	}
}

// rawRemoteRig runs up with no servers of its own and policy, and a server "remote" published
// by hand (registry events as another registrysync would publish them, and its dispatch
// endpoint answered here) with two read-only tools, hello and bye.
func rawRemoteRig(t *testing.T, policy string) (*upProcess, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "mcpstream.yaml")
	if err := os.WriteFile(cfgPath, []byte("servers: []\n"+policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUp(t, "--config", cfgPath)
	waitFor(t, "up healthy", 600, func() bool { code, _ := p.healthz(t); return code == 200 })
	nc, js := rawConnect(t, p.nats)
	sub, err := nc.Subscribe("mcpstream.v1.dispatch.remote", func(m *nats.Msg) {
		m.Respond([]byte(`{"v":1,"result":{"content":[{"type":"text","text":"hi"}]}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for subject, payload := range map[string]string{
		"mcpstream.v1.registry.remote.status": `{"v":1,"type":"status","server":"remote","status":"ready","at":"` + now + `"}`,
	} {
		if _, err := js.Publish(t.Context(), subject, []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	tool := func(name string) string {
		return `{"name":"` + name + `","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`
	}
	if _, err := js.Publish(t.Context(), "mcpstream.v1.registry.remote.snapshot.tools",
		[]byte(`{"v":1,"type":"snapshot","server":"remote","kind":"tools","fingerprint":"f1","listedAt":"`+now+`","pages":1,"items":[`+tool("hello")+`,`+tool("bye")+`]}`)); err != nil {
		t.Fatal(err)
	}
	return p, nc, js
}

// TestRawNATSNoUserUnderConfiguredPolicy: under a configured policy, even one without a
// principals list (users and roles come from the requests), a request that names no user is
// unknown_principal ("no user given") on every service — not only a user a principals list
// leaves out, as README's error table said; the open policy reads it as local.
func TestRawNATSNoUserUnderConfiguredPolicy(t *testing.T) {
	_, nc, _ := rawRemoteRig(t, "policy:\n  rules:\n    - name: everyone\n      allow: [\"*\"]\n")
	exec := "mcpstream.v1.exec.local"
	waitFor(t, "remote__hello callable", 400, func() bool {
		r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-warm-`+strconv.FormatInt(time.Now().UnixNano(), 36)+`","tool":"remote__hello","arguments":{},"principal":{"user":"u"}}`)
		return r.str("status") == "ok"
	})
	for _, principal := range []string{``, `,"principal":{}`, `,"principal":{"user":""}`, `,"principal":{"roles":["admin"]}`} {
		r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-nouser","tool":"remote__hello","arguments":{}`+principal+`}`)
		if r.str("status") != "refused" || r.errorCode() != "unknown_principal" {
			t.Errorf("call with %q: got %s; want refused unknown_principal", principal, r.Data)
		}
		for op, body := range map[string]string{
			"search":  `{"v":1,"query":"hello"` + principal + `}`,
			"details": `{"v":1,"names":["remote__hello"]` + principal + `}`,
			"servers": `{"v":1` + principal + `}`,
		} {
			r := rawRequest(t, nc, "mcpstream.v1.catalog.local."+op, body)
			if r.errorCode() != "unknown_principal" || r.Header.Get("Nats-Service-Error-Code") != "unknown_principal" {
				t.Errorf("%s with %q: got %s (headers %v); want unknown_principal", op, principal, r.Data, r.Header)
			}
		}
	}
}

// TestRawNATSRevocationNeedsVersion: registry events are not requests: a revocation published
// by hand without "v":1 is skipped as malformed (counted in mcpstream_catalog_bad_events_total)
// and revokes nothing, where a request without "v" is read as version 1. With "v":1 (README's
// example) it revokes.
func TestRawNATSRevocationNeedsVersion(t *testing.T) {
	p, nc, js := rawRemoteRig(t, "")
	exec := "mcpstream.v1.exec.local"
	details := "mcpstream.v1.catalog.local.details"
	waitFor(t, "remote__hello callable", 400, func() bool {
		r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-warm-`+strconv.FormatInt(time.Now().UnixNano(), 36)+`","tool":"remote__hello","arguments":{}}`)
		return r.str("status") == "ok"
	})
	badEvents := regexp.MustCompile(`(?m)^mcpstream_catalog_bad_events_total\{[^}]*\} (\d+)$`)
	count := func() int {
		m := badEvents.FindStringSubmatch(p.metrics(t))
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := count()
	// Without "v", then README's form for another tool: stored in this order on the server's
	// subject, so once bye is revoked the first was read.
	for _, payload := range []string{
		`{"type":"revoked","server":"remote","tools":["hello"],"reason":"no v"}`,
		`{"v":1,"type":"revoked","server":"remote","tools":["bye"],"reason":"incident 42","at":"2026-11-30T12:00:00Z"}`,
	} {
		if _, err := js.Publish(t.Context(), "mcpstream.v1.registry.remote.revoked", []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "bye revoked on the executor", 400, func() bool {
		r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-bye-`+strconv.FormatInt(time.Now().UnixNano(), 36)+`","tool":"remote__bye","arguments":{}}`)
		return r.errorCode() == "stale"
	})
	waitFor(t, "bye revoked in the catalog", 400, func() bool {
		r := rawRequest(t, nc, details, `{"v":1,"names":["remote__bye"]}`)
		tools, _ := r.Body["tools"].([]any)
		return len(tools) == 1 && tools[0].(map[string]any)["state"] == "revoked"
	})
	if r := rawRequest(t, nc, exec, `{"v":1,"id":"raw-hello-after","tool":"remote__hello","arguments":{}}`); r.str("status") != "ok" {
		t.Errorf("hello after a revocation without \"v\": got %s; want it still callable", r.Data)
	}
	r := rawRequest(t, nc, details, `{"v":1,"names":["remote__hello"]}`)
	if tools, _ := r.Body["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["state"] != "fresh" {
		t.Errorf("details of hello after a revocation without \"v\": got %s; want fresh", r.Data)
	}
	if got := count(); got != before+1 {
		t.Errorf("mcpstream_catalog_bad_events_total went from %d to %d; want one more", before, got)
	}
}

// TestRawNATSCallsReplyToRefusedUnstored: a call published on mcpstream.v1.calls.<tenant> with
// Mcpstream-Reply-To (an inbox) gets its answer there. A request the worker refuses without
// storing an answer — no id, an id over 256 bytes, not a CallRequest, a subject whose tenant
// token is not valid — has no results subject to be read on: it was refused into the audit
// stream alone, and its caller waited on its inbox for ever (the exec subject answers the same
// requests bad_request at once). It is answered on the inbox, refused bad_request.
func TestRawNATSCallsReplyToRefusedUnstored(t *testing.T) {
	_, nc, js := rawRemoteRig(t, "")
	for _, tc := range []struct{ subject, payload string }{
		{"mcpstream.v1.calls.local", `{"v":1,"tool":"remote__hello","arguments":{}}`},
		{"mcpstream.v1.calls.local", `{"v":1,"id":"` + strings.Repeat("i", 257) + `","tool":"remote__hello","arguments":{}}`},
		{"mcpstream.v1.calls.local", `not json`},
		{"mcpstream.v1.calls.acme~2ecorp", `{"v":1,"id":"raw-bad-tenant","tool":"remote__hello","arguments":{}}`}, // lower-case hex: no valid token
		{"mcpstream.v1.calls." + strings.Repeat("t", 1025), `{"v":1,"id":"raw-long-tenant","tool":"remote__hello","arguments":{}}`},
		{"mcpstream.v1.calls.~", `{"v":1,"id":"raw-empty-tenant","tool":"remote__hello","arguments":{}}`}, // the empty tenant: none
	} {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(tc.subject)
		m.Data = []byte(tc.payload)
		m.Header.Set("Mcpstream-Reply-To", inbox)
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatalf("publish on %.60s: %v", tc.subject, err)
		}
		got, err := sub.NextMsg(10 * time.Second)
		sub.Unsubscribe()
		if err != nil {
			t.Errorf("%.60s %.60s: no answer on Mcpstream-Reply-To: %v", tc.subject, tc.payload, err)
			continue
		}
		var res struct {
			Status string `json:"status"`
			Error  struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(got.Data, &res); err != nil || res.Status != "refused" || res.Error.Code != "bad_request" {
			t.Errorf("%.60s %.60s: got %s; want refused bad_request", tc.subject, tc.payload, got.Data)
		}
	}
}

// TestRawNATSEmptyTenantIsBadRequest: "~" encodes the empty string, and the empty string is no
// tenant (a principal without a tenant is the local tenant's, never the empty one's): a request
// on a subject whose tenant token is "~" is bad_request, as one with a tenant token that is not
// valid. It was refused unknown_principal ("local" is not a principal of tenant "": a user of
// another tenant...), under the open policy too, where README says no principal is unknown.
func TestRawNATSEmptyTenantIsBadRequest(t *testing.T) {
	_, nc, _ := rawRemoteRig(t, "")
	r := rawRequest(t, nc, "mcpstream.v1.exec.~", `{"v":1,"id":"raw-empty","tool":"remote__hello","arguments":{}}`)
	if r.str("status") != "refused" || r.errorCode() != "bad_request" {
		t.Errorf("call on exec.~: got %s; want refused bad_request", r.Data)
	}
	for op, body := range map[string]string{
		"search":  `{"v":1,"query":"hello"}`,
		"details": `{"v":1,"names":["remote__hello"]}`,
		"servers": `{"v":1}`,
	} {
		r := rawRequest(t, nc, "mcpstream.v1.catalog.~."+op, body)
		if r.errorCode() != "bad_request" || r.Header.Get("Nats-Service-Error-Code") != "bad_request" {
			t.Errorf("%s on catalog.~: got %s (headers %v); want bad_request", op, r.Data, r.Header)
		}
	}
}
