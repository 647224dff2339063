package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// auditSecret is the configured secret of the audit differential (the connectors' and the
// executor's): it must appear in no audit event and no stored answer, in any spelling README
// names (as is, JSON-escaped, percent-escaped, base64).
const auditSecret = "Zq9s3cr3tV4lue"

// auditCase is one call of the differential, as sent.
type auditCase struct {
	tenant, id, tool, kind string
	args                   string // as sent ("" none)
	res                    subjects.CallResult
	got                    bool // an answer came to the caller (not for a Submit)
	direct                 bool // published on calls.<tenant>, not sent to exec.<tenant>
}

// frontEndRefused: the front end refuses the envelope of these kinds, storing nothing.
func (c *auditCase) frontEndRefused() bool {
	return !c.direct && (c.kind == "badversion" || c.kind == "longuser")
}

// TestAuditDifferential: per seed, a random mix of calls (several tenants and principals; read-only,
// side-effecting and approval-gated tools approved (resent while waiting), denied, timed out or
// not waited for; results failing their outputSchema; unknown tools, forbidden, invalid
// arguments, rate-limited, tool errors, timeouts, results over the size cap, arguments holding
// the configured secret; resends of an id; calls through exec.<tenant> and published straight on
// calls.<tenant>). Then for every call id: the
// one stored answer on the results stream is the caller's; its audit events are request, then
// decisions, then dispatch (only for a side-effecting tool that was sent), then one result, each
// once (a resend adds none); the last decision's code is the answer's (allowed for an answer
// without an error), the result event's status, code, isError and result size agree with the
// answer; the request's argument size is that of the arguments sent and its arguments are capped
// as documented; no configured secret in any spelling appears in any audit or result message.
// A request the front end refuses for its envelope (another version, a user over its limit) is
// stored nowhere: its trail is compared with the caller's answer. Every audit event's subject
// holds its tenant's token, every answer's its tenant and id; every audit event is UTF-8 JSON.
// MCPSTREAM_TEST_AUDIT_SEEDS=N runs N seeds (default 2) from MCPSTREAM_TEST_AUDIT_SEED0 (1);
// MCPSTREAM_TEST_AUDIT_TRAILS=1 logs each call's trail.
func TestAuditDifferential(t *testing.T) {
	first, seeds := envSeeds("MCPSTREAM_TEST_AUDIT", 2)
	pol, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"local": {Tenant: "local", Roles: []string{"admin"}},
			"alice": {Tenant: "acme", Roles: []string{"dev"}},
			"bob":   {Tenant: "acme", Roles: []string{"viewer"}},
			"carol": {Tenant: "my.team ü", Roles: []string{"dev"}},
		},
		Rules: []policy.Rule{
			{Name: "admins", Roles: []string{"admin"}, Allow: []string{"*"}},
			{Name: "devs", Roles: []string{"dev"}, Allow: []string{"fixture__*", "ticketing__*"}, Deny: []string{"fixture__fail"}},
			{Name: "viewers", Roles: []string{"viewer"}, Allow: []string{"ticketing__listIssues"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const auditBytes = 512
	r := startRig(t, rigOptions{
		servers: []string{"fixture", "ticketing"},
		secrets: []string{auditSecret},
		exec: Config{Policy: pol, Secrets: []string{auditSecret}, AuditBytes: auditBytes, MaxResultBytes: 8 << 10,
			Approve: []string{"fixture__wipe"}, Workers: 8,
			Limits: Limits{Tools: map[string]Rate{"fixture__legacy": {PerSecond: 0.001, Burst: 1}}}},
	})
	for seed := first; seed < first+uint64(seeds); seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) { runAuditSeed(t, r, seed, auditBytes) })
	}
}

func runAuditSeed(t *testing.T, r *rig, seed uint64, auditBytes int) {
	rng := rand.New(rand.NewPCG(seed, 0xa0d17))
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	secretArg := func() string {
		switch rng.IntN(4) {
		case 0:
			return auditSecret
		case 1:
			return "pre-" + auditSecret + "-post"
		case 2:
			return base64.StdEncoding.EncodeToString([]byte("x" + auditSecret))
		default:
			return url.QueryEscape("a b/" + auditSecret)
		}
	}
	type spec struct {
		kind, tenant, user, tool, args string
		mod                            []func(*subjects.CallRequest)
	}
	// secretLit is a JSON string literal spelling the secret, possibly with escapes.
	secretLit := func() string {
		switch rng.IntN(3) {
		case 0:
			return `"\u005a` + auditSecret[1:] + `"`
		case 1:
			return `"` + auditSecret[:4] + `\u0033` + auditSecret[5:] + `"`
		default:
			return "\"in \xff" + auditSecret + " \xfe text\""
		}
	}
	mk := func() spec {
		switch rng.IntN(22) {
		case 0:
			if rng.IntN(2) == 0 {
				return spec{kind: "ok", tenant: "my.team ü", user: "carol", tool: "fixture__echo", args: `{"text":"hello"}`}
			}
			return spec{kind: "ok", tenant: "acme", user: "alice", tool: "fixture__echo", args: `{"text":"hello"}`}
		case 1:
			return spec{kind: "secret", tenant: "acme", user: "alice", tool: "fixture__echo", args: fmt.Sprintf(`{"text":%q}`, secretArg())}
		case 2:
			return spec{kind: "secretkey", tenant: "local", user: "local", tool: "fixture__echo",
				args: fmt.Sprintf(`{"text":"t","password":%q,"api_key":"k-%d","nested":{"Token":[1,2]}}`, secretArg(), rng.IntN(1000))}
		case 3:
			return spec{kind: "big", tenant: "local", user: "local", tool: "fixture__echo", args: fmt.Sprintf(`{"text":%q}`, strings.Repeat("z", 400+rng.IntN(3000))+auditSecret)}
		case 4:
			return spec{kind: "toolarge", tenant: "local", user: "local", tool: "fixture__echo", args: fmt.Sprintf(`{"text":%q}`, strings.Repeat("y", 9000))}
		case 5:
			return spec{kind: "iserror", tenant: "local", user: "local", tool: "fixture__fail", args: `{}`}
		case 6:
			return spec{kind: "forbidden", tenant: "acme", user: "alice", tool: "fixture__fail", args: `{}`}
		case 7:
			return spec{kind: "forbidden", tenant: "acme", user: "bob", tool: "fixture__echo", args: `{"text":"x"}`}
		case 8:
			return spec{kind: "notfound", tenant: "acme", user: "alice", tool: "fixture__nosuch" + strconv.Itoa(rng.IntN(3)), args: `{}`}
		case 9:
			return spec{kind: "invalid", tenant: "local", user: "local", tool: "fixture__legacy", args: fmt.Sprintf(`{"host":%q}`, auditSecret)}
		case 10:
			return spec{kind: "ratelimit", tenant: "local", user: "local", tool: "fixture__legacy", args: `{"host":"h","port":1}`}
		case 11:
			return spec{kind: "timeout", tenant: "local", user: "local", tool: "fixture__slow", args: `{"ms":3000}`, mod: []func(*subjects.CallRequest){timeoutMs(200)}}
		case 12:
			return spec{kind: "unknownuser", tenant: "acme", user: "mallory", tool: "fixture__echo", args: `{"text":"x"}`}
		case 13:
			return spec{kind: "sideeffect", tenant: "local", user: "local", tool: "ticketing__createIssue",
				args: fmt.Sprintf(`{"title":"t%d","body":%q,"priority":"low"}`, rng.IntN(100), "see "+auditSecret)}
		case 14:
			return spec{kind: "broken", tenant: "local", user: "local", tool: "fixture__broken", args: `{}`}
		case 15:
			return spec{kind: "escaped", tenant: "acme", user: "alice", tool: "fixture__echo", args: `{"text":` + secretLit() + `}`}
		case 16:
			return spec{kind: "private", tenant: "acme", user: "alice", tool: "ticketing__createIssue", args: `{}`}
		case 18:
			switch rng.IntN(3) {
			case 0:
				return spec{kind: "badversion", tenant: "acme", user: "alice", tool: "fixture__echo", args: `{"text":"x"}`, mod: []func(*subjects.CallRequest){func(r *subjects.CallRequest) { r.V = 2 }}}
			case 1:
				return spec{kind: "othertenant", tenant: "acme", user: "alice", tool: "fixture__echo", args: `{"text":"x"}`, mod: []func(*subjects.CallRequest){func(r *subjects.CallRequest) { r.Principal.Tenant = "local" }}}
			default:
				return spec{kind: "longuser", tenant: "acme", user: strings.Repeat("u", 1500), tool: "fixture__echo", args: `{"text":"x"}`}
			}
		case 19:
			mode := []string{"ok", "wrong", "missing", "error", "null", "pattern"}[rng.IntN(6)]
			return spec{kind: "report-" + mode, tenant: "acme", user: "alice", tool: "fixture__report", args: `{"mode":"` + mode + `"}`}
		case 17:
			return spec{kind: "badargs", tenant: "local", user: "local", tool: "fixture__echo", args: `["` + auditSecret + `"]`}
		default:
			switch rng.IntN(4) {
			case 0:
				return spec{kind: "approve", tenant: "local", user: "local", tool: "fixture__wipe", args: `{"why":"` + auditSecret + `"}`}
			case 1:
				return spec{kind: "deny", tenant: "local", user: "local", tool: "fixture__wipe", args: `{}`}
			case 2:
				return spec{kind: "approvaltimeout", tenant: "local", user: "local", tool: "fixture__wipe", args: `{}`, mod: []func(*subjects.CallRequest){approvalMs(300)}}
			default:
				return spec{kind: "nowait", tenant: "local", user: "local", tool: "fixture__wipe", args: `{}`, mod: []func(*subjects.CallRequest){approvalMs(-1)}}
			}
		}
	}

	n := 18 + rng.IntN(8)
	cases := make([]*auditCase, n)
	var wg sync.WaitGroup
	for i := range n {
		s := mk()
		c := &auditCase{tenant: s.tenant, id: fmt.Sprintf("aud-%d-%d-%s", seed, i, s.kind), tool: s.tool, kind: s.kind, args: s.args}
		cases[i] = c
		req := subjects.CallRequest{V: 1, ID: c.id, Tool: s.tool, Arguments: json.RawMessage(s.args), Principal: subjects.Principal{User: s.user}}
		for _, m := range s.mod {
			m(&req)
		}
		direct := rng.IntN(3) == 0
		c.direct = direct
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.kind == "approve" || s.kind == "deny" {
				go func() {
					waitFor(t, "needs_approval of "+c.id, func() bool {
						for _, ev := range r.auditEvents(c.tenant, c.id) {
							if ev.Decision == subjects.CodeNeedsApproval {
								return true
							}
						}
						return false
					})
					// A resend of the id while it waits: the same answer, no event of its own.
					var resent sync.WaitGroup
					if rng2 := seed + uint64(i); rng2%2 == 0 {
						resent.Add(1)
						go func() {
							defer resent.Done()
							res, err := r.client.Call(ctx, c.tenant, req)
							if err != nil || !res.Duplicate {
								t.Errorf("resend in flight %s: %v %s %+v duplicate=%v", c.id, err, res.Status, res.Error, res.Duplicate)
							}
						}()
						time.Sleep(50 * time.Millisecond)
					}
					defer resent.Wait()
					if _, err := r.client.Decide(ctx, subjects.Approval{ID: c.id, Tenant: c.tenant, Approve: s.kind == "approve", By: "ops", Reason: "seeded " + auditSecret}); err != nil {
						t.Errorf("decide %s: %v", c.id, err)
					}
				}()
			}
			if direct {
				data, _ := json.Marshal(req)
				m := nats.NewMsg(subjects.Calls(c.tenant))
				m.Data = data
				m.Header.Set(nats.MsgIdHdr, subjects.CallMsgID(c.tenant, c.id))
				if _, err := r.env.JS.PublishMsg(ctx, m); err != nil {
					t.Errorf("publish %s: %v", c.id, err)
				}
				return
			}
			res, err := r.client.Call(ctx, c.tenant, req)
			if err != nil {
				t.Errorf("call %s: %v", c.id, err)
				return
			}
			c.res, c.got = res, true
		}()
	}
	wg.Wait()
	// Resends of some ids, both ways: the first answer, no new audit event.
	for _, c := range cases {
		if rng.IntN(3) != 0 || c.frontEndRefused() {
			continue
		}
		req := subjects.CallRequest{V: 1, ID: c.id, Tool: c.tool, Arguments: json.RawMessage(c.args), Principal: subjects.Principal{User: "local"}}
		if rng.IntN(2) == 0 {
			res, err := r.client.Call(ctx, c.tenant, req)
			if err != nil {
				t.Errorf("resend %s: %v", c.id, err)
			} else if !res.Duplicate {
				t.Errorf("resend %s: got %s %+v, not duplicate", c.id, res.Status, res.Error)
			}
		} else {
			data, _ := json.Marshal(req)
			m := nats.NewMsg(subjects.Calls(c.tenant))
			m.Data = data
			m.Header.Set(nats.MsgIdHdr, subjects.CallMsgID(c.tenant, c.id))
			if _, err := r.env.JS.PublishMsg(ctx, m); err != nil {
				t.Errorf("republish %s: %v", c.id, err)
			}
		}
	}
	r.waitCallsSettled(ctx)

	results, err := r.env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		subj := subjects.Result(c.tenant, c.id)
		info, err := results.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		if c.frontEndRefused() {
			// Nothing stored: the caller's answer is the call's.
			if got := info.State.Subjects[subj]; got != 0 || !c.got {
				t.Errorf("%s: %d answers stored of a refused envelope (answered %v), want 0", c.id, got, c.got)
				continue
			}
			var evs []subjects.AuditEvent
			waitFor(t, "audit events of "+c.id, func() bool { evs = r.auditEvents(c.tenant, c.id); return hasResultEvent(evs) })
			time.Sleep(20 * time.Millisecond)
			checkAuditTrail(t, c, c.res, r.auditEvents(c.tenant, c.id), auditBytes, nil)
			continue
		}
		if got := info.State.Subjects[subj]; got != 1 {
			t.Errorf("%s: %d answers stored, want 1", c.id, got)
			continue
		}
		raw, err := results.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			t.Fatal(err)
		}
		var stored subjects.CallResult
		if err := json.Unmarshal(raw.Data, &stored); err != nil {
			t.Fatal(err)
		}
		if c.got && (c.res.Status != stored.Status || codeOf(c.res.Error) != codeOf(stored.Error)) {
			t.Errorf("%s: caller got %s %s, stored %s %s", c.id, c.res.Status, codeOf(c.res.Error), stored.Status, codeOf(stored.Error))
		}
		var evs []subjects.AuditEvent
		waitFor(t, "audit events of "+c.id, func() bool { evs = r.auditEvents(c.tenant, c.id); return hasResultEvent(evs) })
		time.Sleep(20 * time.Millisecond)
		evs = r.auditEvents(c.tenant, c.id)
		checkAuditTrail(t, c, stored, evs, auditBytes, r.ex.reg.lookup(c.tool))
	}
	// No secret anywhere, in any spelling.
	for _, stream := range []string{subjects.AuditStream, subjects.ResultsStream} {
		s, err := r.env.JS.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			if stream == subjects.AuditStream && (!utf8.Valid(m.Data) || !json.Valid(m.Data)) {
				t.Errorf("audit event %s is not UTF-8 JSON: %q", m.Subject, m.Data)
			}
			// The subject's tenant token is the payload's tenant, encoded.
			if stream == subjects.AuditStream {
				var ev subjects.AuditEvent
				if json.Unmarshal(m.Data, &ev) == nil {
					want := subjects.Audit(ev.Tenant, strings.TrimPrefix(ev.Type, "audit."))
					if ev.Tenant == "" {
						want = subjects.AuditNoTenant(strings.TrimPrefix(ev.Type, "audit."))
					}
					if m.Subject != want {
						t.Errorf("audit event of tenant %q on %s, want %s", ev.Tenant, m.Subject, want)
					}
				}
			} else {
				var res subjects.CallResult
				if json.Unmarshal(m.Data, &res) == nil && m.Subject != subjects.Result(res.Tenant, res.ID) {
					t.Errorf("answer of %q/%q on %s", res.Tenant, res.ID, m.Subject)
				}
			}
			if form, ok := holdsSecretForm(m.Data, auditSecret); ok {
				t.Errorf("%s %s holds the secret (%s): %.600s", stream, m.Subject, form, m.Data)
			}
		}
	}
}

func codeOf(e *subjects.Error) string {
	if e == nil {
		return ""
	}
	return e.Code
}

// holdsSecretForm reports whether data spells secret in one of the forms README names.
func holdsSecretForm(data []byte, secret string) (string, bool) {
	s := string(data)
	forms := map[string]string{
		"plain":   secret,
		"percent": url.QueryEscape(secret),
	}
	for i := range 3 {
		// base64 of the secret at each alignment, its inner characters only.
		pre := strings.Repeat("x", i)
		enc := base64.StdEncoding.EncodeToString([]byte(pre + secret))
		start := (i*8 + 5) / 6
		forms[fmt.Sprintf("base64/%d", i)] = enc[start+1 : start+1+12]
	}
	var dec string
	if err := json.Unmarshal(data, new(any)); err == nil {
		// JSON escapes: compare the decoded strings too.
		dec = decodedStrings(data)
	}
	for name, f := range forms {
		if strings.Contains(s, f) || strings.Contains(dec, f) {
			return name, true
		}
	}
	return "", false
}

// decodedStrings is every string and key of a JSON document, decoded, joined by newlines; a
// string that holds JSON is decoded too.
func decodedStrings(data []byte) string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				b.WriteString(k + "\n")
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			b.WriteString(x + "\n")
			if inner := decodedStrings([]byte(x)); inner != "" {
				b.WriteString(inner)
			}
		}
	}
	walk(v)
	return b.String()
}

// checkAuditTrail compares the audit events of one call id with its stored answer.
func checkAuditTrail(t *testing.T, c *auditCase, ans subjects.CallResult, evs []subjects.AuditEvent, auditBytes int, tl *tool) {
	t.Helper()
	var types []string
	for _, ev := range evs {
		types = append(types, strings.TrimPrefix(ev.Type, "audit.")+"/"+cmpOr(ev.Code, ev.Decision))
	}
	trail := c.kind + ": " + strings.Join(types, " ")
	fail := func(format string, a ...any) {
		t.Helper()
		t.Errorf("%s (%s; answer %s %s): %s", c.id, trail, ans.Status, codeOf(ans.Error), fmt.Sprintf(format, a...))
	}
	if os.Getenv("MCPSTREAM_TEST_AUDIT_TRAILS") != "" {
		t.Logf("%s %s %s: %s", c.id, ans.Status, codeOf(ans.Error), trail)
	}
	if len(evs) < 3 {
		fail("want at least request, decision, result")
		return
	}
	for _, ev := range evs {
		if ev.Tenant != c.tenant || ev.CallID != c.id || ev.V != 1 {
			fail("event %s tenant %q id %q v %d", ev.Type, ev.Tenant, ev.CallID, ev.V)
		}
		if ev.Tool != c.tool {
			fail("event %s tool %q", ev.Type, ev.Tool)
		}
	}
	req, res := evs[0], evs[len(evs)-1]
	if req.Type != "audit.request" || res.Type != "audit.result" {
		fail("want request first, result last")
		return
	}
	mid := evs[1 : len(evs)-1]
	var decisions []subjects.AuditEvent
	dispatches := 0
	for i, ev := range mid {
		switch ev.Type {
		case "audit.decision":
			decisions = append(decisions, ev)
		case "audit.dispatch":
			dispatches++
			if i == 0 {
				fail("dispatch before any decision")
			}
		default:
			fail("unexpected event %s in the middle", ev.Type)
		}
	}
	if len(decisions) == 0 {
		fail("no decision")
		return
	}
	last := decisions[len(decisions)-1]
	wantCode := codeOf(ans.Error)
	if wantCode == "" {
		if last.Decision != subjects.DecisionAllowed && last.Decision != subjects.DecisionApproved || last.Code != "" {
			fail("last decision %s/%s for an answer without error", last.Decision, last.Code)
		}
	} else if last.Code != wantCode || last.Decision != wantCode {
		fail("last decision %s/%s, answer code %s", last.Decision, last.Code, wantCode)
	}
	if dispatches > 1 {
		fail("%d dispatch events", dispatches)
	}
	if tl != nil && tl.retrySafe() && dispatches > 0 {
		fail("dispatch event of a read-only or idempotent tool")
	}
	// The result event.
	if res.Decision != ans.Status || res.Code != wantCode {
		fail("result event %s/%s", res.Decision, res.Code)
	}
	if ans.Error != nil && res.Message != ans.Error.Message {
		fail("result event message %q, answer's %q", res.Message, ans.Error.Message)
	}
	if res.IsError != isToolError(ans.Result) {
		fail("result event isError %v", res.IsError)
	}
	if len(ans.Result) > 0 {
		if res.ResBytes != len(ans.Result) {
			fail("result event resultBytes %d, answer's result %d bytes", res.ResBytes, len(ans.Result))
		}
		if res.Truncated != (len(ans.Result) > auditBytes) {
			fail("result event truncated %v, result %d bytes", res.Truncated, len(ans.Result))
		}
	}
	if strings.HasPrefix(c.kind, "report-") && wantCode == subjects.CodeProtocolError && (len(res.Result) == 0 || res.ResBytes == 0) {
		fail("a result failing its outputSchema is not kept in the result event (%d bytes, resultBytes %d)", len(res.Result), res.ResBytes)
	}
	if len(res.Result) > 0 && len(res.Result) > 2*auditBytes+2 {
		fail("result event result %d bytes over the cap %d", len(res.Result), auditBytes)
	}
	// The request event.
	if c.args != "" && c.kind != "badversion" && c.kind != "longuser" { // (a bad envelope's arguments are its whole message)
		if req.ArgBytes != len(c.args) {
			fail("request event argBytes %d, arguments %d bytes", req.ArgBytes, len(c.args))
		}
		if (len(c.args) > auditBytes) != req.Truncated {
			fail("request event truncated %v, arguments %d bytes", req.Truncated, len(c.args))
		}
	}
	if len(req.Arguments) > 2*auditBytes+2 {
		fail("request event arguments %d bytes over the cap %d", len(req.Arguments), auditBytes)
	}
	for _, ev := range evs[1:] {
		if ev.Type == "audit.request" {
			fail("a second request event")
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
