package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// testPolicy is a closed policy: local is the host admin, alice a developer and bob a viewer of
// tenant acme.
func testPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"local": {Tenant: "local", Roles: []string{"admin"}},
			"alice": {Tenant: "acme", Roles: []string{"dev"}},
			"bob":   {Tenant: "acme", Roles: []string{"viewer"}},
		},
		Rules: []policy.Rule{
			{Name: "admins", Roles: []string{"admin"}, Allow: []string{"*"}},
			{Name: "devs", Roles: []string{"dev"}, Allow: []string{"ticketing__*", "fixture__*", "logging__*"}, Deny: []string{"ticketing__closeIssue", "fixture__fail"}},
			{Name: "viewers", Roles: []string{"viewer"}, Allow: []string{"logging__*"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func as(user string) func(*subjects.CallRequest) {
	return func(r *subjects.CallRequest) { r.Principal = subjects.Principal{User: user} }
}

func timeoutMs(ms int64) func(*subjects.CallRequest) {
	return func(r *subjects.CallRequest) { r.TimeoutMs = ms }
}

func approvalMs(ms int64) func(*subjects.CallRequest) {
	return func(r *subjects.CallRequest) { r.ApprovalTimeoutMs = ms }
}

// Every refusal and failure code the pipeline produces, through the NATS API (exec request/reply)
// against real demo and fixture servers behind a real registrysync manager.
func TestErrorCodes(t *testing.T) {
	r := startRig(t, rigOptions{
		servers: []string{"ticketing", "logging", "fixture"},
		exec:    Config{Policy: testPolicy(t), MaxResultBytes: 16 << 10},
	})
	// An operator revokes fixture's exit tool; a hand-published snapshot lists a tool whose
	// schema does not compile (as a connector would publish it).
	r.publishRegistry(subjects.RegistryRevoked("fixture"), subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "fixture", Tools: []string{"exit"}, At: time.Now()})
	r.publishRegistry(subjects.RegistrySnapshot("handmade", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "handmade", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"odd","inputSchema":{"type":42},"annotations":{"readOnlyHint":true}}`)}})
	r.waitTool("handmade__odd")
	waitFor(t, "revocation applied", func() bool { return r.ex.reg.view.Tool("fixture", "exit").State == "revoked" })

	circle := `{"shape":{"kind":"circle","center":{"x":1,"y":2},"r":3},"label":"c"}`
	cases := []struct {
		name           string
		tenant, tool   string
		args           string
		mod            []func(*subjects.CallRequest)
		status, code   string
		path, contains string
	}{
		{name: "ok", tenant: "local", tool: "fixture__shape", args: circle, status: subjects.CallOK},
		{name: "ok draft-07", tenant: "acme", tool: "fixture__legacy", args: `{"host":"db","port":5432}`, mod: fns(as("alice")), status: subjects.CallOK},
		{name: "isError is a result", tenant: "local", tool: "fixture__fail", args: `{}`, status: subjects.CallOK, contains: `"isError":true`},
		{name: "missing tool", tenant: "local", tool: "", status: subjects.CallRefused, code: subjects.CodeBadRequest},
		{name: "unknown server", tenant: "local", tool: "nosuchserver__nosuchtool", args: `{}`, status: subjects.CallRefused, code: subjects.CodeNotFound},
		{name: "unknown tool", tenant: "local", tool: "ticketing__nosuch", args: `{}`, status: subjects.CallRefused, code: subjects.CodeNotFound},
		{name: "revoked", tenant: "local", tool: "fixture__exit", args: `{}`, status: subjects.CallRefused, code: subjects.CodeStale, contains: "revoked"},
		{name: "unknown principal", tenant: "acme", tool: "logging__getLogStats", args: `{}`, mod: fns(as("mallory")), status: subjects.CallRefused, code: subjects.CodeUnknownPrincipal},
		// The answer does not say which tenant alice belongs to: a publisher on one tenant's
		// subjects learns nothing of another tenant's users.
		{name: "principal of another tenant", tenant: "local", tool: "logging__getLogStats", args: `{}`, mod: fns(as("alice")), status: subjects.CallRefused, code: subjects.CodeUnknownPrincipal, contains: `"alice" is not a principal of tenant "local"`},
		{name: "no rule allows", tenant: "acme", tool: "fixture__echo", args: `{"text":"hi"}`, mod: fns(as("bob")), status: subjects.CallRefused, code: subjects.CodeForbidden},
		{name: "denied by rule", tenant: "acme", tool: "fixture__fail", args: `{}`, mod: fns(as("alice")), status: subjects.CallRefused, code: subjects.CodeForbidden, contains: "denied by devs"},
		{name: "denied, and only in another context's private list", tenant: "acme", tool: "ticketing__closeIssue", args: `{"id":"TCK-1"}`, mod: fns(as("alice")), status: subjects.CallRefused, code: subjects.CodeNotFound, contains: "no tool ticketing__closeIssue is listed"},
		{name: "private list of another context", tenant: "acme", tool: "ticketing__listIssues", args: `{}`, mod: fns(as("alice")), status: subjects.CallRefused, code: subjects.CodeNotFound, contains: "no tool ticketing__listIssues is listed"},
		{name: "bad arguments", tenant: "local", tool: "ticketing__createIssue", args: `{"title": {"not": "a string"}, "unexpected": [1,2,3]}`, status: subjects.CallRefused, code: subjects.CodeInvalidArguments, path: "/body", contains: "at '/title': got object, want string"},
		{name: "missing property", tenant: "local", tool: "ticketing__createIssue", args: `{"title":"x","priority":"low"}`, status: subjects.CallRefused, code: subjects.CodeInvalidArguments, path: "/body"},
		{name: "arguments not an object", tenant: "local", tool: "ticketing__createIssue", args: `[1]`, status: subjects.CallRefused, code: subjects.CodeInvalidArguments},
		{name: "oneOf none matches", tenant: "local", tool: "fixture__shape", args: `{"shape":{"kind":"square"}}`, status: subjects.CallRefused, code: subjects.CodeInvalidArguments, path: "/shape", contains: "oneOf"},
		{name: "ref in oneOf", tenant: "local", tool: "fixture__shape", args: `{"shape":{"kind":"circle","center":{"x":1},"r":3}}`, status: subjects.CallRefused, code: subjects.CodeInvalidArguments, path: "/shape"},
		{name: "anyOf", tenant: "local", tool: "fixture__shape", args: `{"shape":{"kind":"circle","center":{"x":1,"y":1},"r":3},"label":"far too long a label"}`, status: subjects.CallRefused, code: subjects.CodeInvalidArguments, path: "/label"},
		{name: "draft-07 ref", tenant: "acme", tool: "fixture__legacy", args: `{"host":"db","port":70000}`, mod: fns(as("alice")), status: subjects.CallRefused, code: subjects.CodeInvalidArguments, path: "/port"},
		{name: "schema does not compile", tenant: "local", tool: "handmade__odd", args: `{}`, status: subjects.CallRefused, code: subjects.CodeInvalidSchema},
		{name: "needs approval, no wait", tenant: "local", tool: "ticketing__closeIssue", args: `{"id":"TCK-1"}`, mod: fns(approvalMs(-1)), status: subjects.CallRefused, code: subjects.CodeNeedsApproval},
		{name: "approval timeout", tenant: "local", tool: "ticketing__closeIssue", args: `{"id":"TCK-1"}`, mod: fns(approvalMs(50)), status: subjects.CallRefused, code: subjects.CodeApprovalTimeout},
		{name: "protocol error", tenant: "local", tool: "fixture__broken", args: `{}`, status: subjects.CallFailed, code: subjects.CodeProtocolError},
		{name: "timeout", tenant: "local", tool: "fixture__slow", args: `{"ms":10000}`, mod: fns(timeoutMs(100)), status: subjects.CallFailed, code: subjects.CodeTimeout},
		{name: "result too large", tenant: "local", tool: "logging__getLogs", args: `{"level":"info","since":0}`, status: subjects.CallFailed, code: subjects.CodeResultTooLarge},
		{name: "unsupported version", tenant: "local", tool: "fixture__echo", args: `{"text":"x"}`, mod: fns(func(r *subjects.CallRequest) { r.V = 2 }), status: subjects.CallRefused, code: subjects.CodeBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.call(tc.tenant, tc.tool, tc.args, tc.mod...)
			if res.Status != tc.status {
				t.Fatalf("got status %s (%+v), want %s", res.Status, res.Error, tc.status)
			}
			code, path, text := "", "", string(res.Result)
			if res.Error != nil {
				code, path, text = res.Error.Code, res.Error.Path, res.Error.Message
			}
			if code != tc.code {
				t.Fatalf("got code %q (%s), want %q", code, text, tc.code)
			}
			if tc.path != "" && path != tc.path {
				t.Errorf("got path %q (%s), want %q", path, text, tc.path)
			}
			if tc.contains != "" && !strings.Contains(text, tc.contains) {
				t.Errorf("got %q, want it to contain %q", text, tc.contains)
			}
			if res.ID == "" || res.Tenant != tc.tenant {
				t.Errorf("got id %q tenant %q, want an id and tenant %q", res.ID, res.Tenant, tc.tenant)
			}
		})
	}
	if got := r.ticketCount(); got != 0 {
		t.Errorf("got %d tickets after refusals only, want 0", got)
	}
}

func fns(f ...func(*subjects.CallRequest)) []func(*subjects.CallRequest) { return f }

// Results keep MCP semantics: structuredContent and isError exactly as the server sent them.
func TestResultSemantics(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	res := r.call("local", "fixture__echo", `{"text":"héllo"}`)
	var got struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		IsError           bool             `json:"isError"`
	}
	if err := json.Unmarshal(res.Result, &got); err != nil {
		t.Fatalf("result %s: %v", res.Result, err)
	}
	if got.StructuredContent["echo"] != "héllo" || got.StructuredContent["len"] != float64(len("héllo")) || got.IsError {
		t.Errorf("got %s, want structuredContent {echo: héllo, len: 6}", res.Result)
	}
	if len(got.Content) == 0 {
		t.Errorf("got no content in %s", res.Result)
	}
	fail := r.call("local", "fixture__fail", `{}`)
	if fail.Status != subjects.CallOK || fail.Error != nil || !isToolError(fail.Result) {
		t.Errorf("got %+v %s, want status ok with isError true", fail.Error, fail.Result)
	}
	broken := r.call("local", "fixture__broken", `{}`)
	if broken.Status != subjects.CallFailed || broken.Error == nil || broken.Error.Code != subjects.CodeProtocolError || len(broken.Result) != 0 {
		t.Errorf("got %s %+v, want failed protocol_error without a result", broken.Status, broken.Error)
	}
}

// A resend of a call id never runs the call again: the caller gets the first answer.
func TestDuplicateCallID(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}})
	args := `{"title":"Once","body":"","priority":"low"}`
	id := func(q *subjects.CallRequest) { q.ID = "same-id" }
	first := r.call("local", "ticketing__createIssue", args, id)
	second := r.call("local", "ticketing__createIssue", args, id)
	if first.Status != subjects.CallOK || second.Status != subjects.CallOK {
		t.Fatalf("got %s then %s, want ok twice", first.Status, second.Status)
	}
	if !second.Duplicate || string(second.Result) != string(first.Result) {
		t.Errorf("got duplicate=%v result %s, want the first answer %s", second.Duplicate, second.Result, first.Result)
	}
	// A caller that does not wait: submit again, then read the answer.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, dup, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: "same-id", Tool: "ticketing__createIssue", Arguments: json.RawMessage(args)}); err != nil || !dup {
		t.Errorf("submit: duplicate=%v err=%v, want a duplicate", dup, err)
	}
	third, err := r.client.Await(ctx, "local", "same-id")
	if err != nil || string(third.Result) != string(first.Result) {
		t.Errorf("await: %v %s, want the first answer", err, third.Result)
	}
	// A resend the stream does not de-duplicate (no Nats-Msg-Id here; after the Duplicates window
	// in real life): the claim finds the earlier answer, published again as a duplicate.
	data, _ := json.Marshal(subjects.CallRequest{V: 1, ID: "same-id", Tool: "ticketing__createIssue", Arguments: json.RawMessage(args)})
	sub, err := r.env.NC.SubscribeSync(subjects.Result("local", "same-id"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.JS.Publish(ctx, subjects.Calls("local"), data); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	var again subjects.CallResult
	if err := json.Unmarshal(m.Data, &again); err != nil || !again.Duplicate || string(again.Result) != string(first.Result) {
		t.Errorf("resend: got duplicate=%v %s (%v), want the first answer again", again.Duplicate, again.Result, err)
	}
	if got := r.ticketCount(); got != 1 {
		t.Errorf("got %d tickets, want 1", got)
	}
}

// Call ids are unique per tenant: the same id from two tenants is two calls, each answered
// (before the dedup key held the tenant, the second tenant's call was dropped as a duplicate).
func TestSameCallIDTwoTenants(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"kb"}})
	id := func(q *subjects.CallRequest) { q.ID = "shared-id" }
	args := `{"query":"refund period for software","topK":1}`
	a := r.call("acme", "kb__search_knowledge_base", args, id)
	b := r.call("globex", "kb__search_knowledge_base", args, id)
	for name, res := range map[string]subjects.CallResult{"acme": a, "globex": b} {
		if res.Status != subjects.CallOK || res.Duplicate || res.Tenant != name {
			t.Errorf("%s: status %s duplicate %v tenant %q error %+v, want its own ok answer", name, res.Status, res.Duplicate, res.Tenant, res.Error)
		}
	}
}
