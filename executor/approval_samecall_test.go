package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestSameCallArguments: a resend of a call whose arguments differ from the first request's
// only in how the same JSON value is written — member order, insignificant whitespace, a
// number's spelling, a string's escapes — asks for the same call: both may wait for the one
// approval. It was refused bad_request as "another call" (only whitespace was ignored). Values
// that differ, and text whose value is not one (not JSON, a member named twice), are other
// calls.
func TestSameCallArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		// The same value, written otherwise.
		{"identical", `{"a":1}`, `{"a":1}`, true},
		{"whitespace", `{"a":1,"b":[1,2]}`, " {\n\t\"a\" : 1 ,\r\n \"b\": [ 1 , 2 ] } ", true},
		{"member order", `{"title":"T","body":"b","priority":"low"}`, `{"priority":"low","title":"T","body":"b"}`, true},
		{"nested member order", `{"a":{"x":1,"y":[{"p":1,"q":2}]},"b":2}`, `{"b":2,"a":{"y":[{"q":2,"p":1}],"x":1}}`, true},
		{"empty objects", `{}`, ` { } `, true},
		{"1 and 1.0", `{"n":1}`, `{"n":1.0}`, true},
		{"1 and 1e0", `{"n":1}`, `{"n":1e0}`, true},
		{"1 and 10e-1", `{"n":1}`, `{"n":10e-1}`, true},
		{"1 and 0.1E+1", `{"n":1}`, `{"n":0.1E+1}`, true},
		{"100 and 1e2", `{"n":100}`, `{"n":1e2}`, true},
		{"-2.50 and -25e-1", `{"n":-2.50}`, `{"n":-25e-1}`, true},
		{"0 and -0", `{"n":0}`, `{"n":-0.0}`, true},
		{"long exact integers", `{"n":123456789012345678901234567890}`, `{"n":1.23456789012345678901234567890e29}`, true},
		{"unicode escape", `{"s":"\u0041"}`, `{"s":"A"}`, true},
		{"escaped name", `{"\u0061":1}`, `{"a":1}`, true},
		{"solidus escape", `{"s":"a\/b"}`, `{"s":"a/b"}`, true},
		{"control escapes", `{"s":"\n\t\""}`, `{"s":"\u000a\u0009\u0022"}`, true},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, `{"s":"😀"}`, true},
		{"hex case", `{"s":"\u00e9"}`, `{"s":"\u00E9"}`, true},
		{"HTML escapes of encoding/json", `{"s":"<a&b>"}`, `{"s":"\u003ca\u0026b\u003e"}`, true},
		{"astral pair", `{"s":"\ud800\udc00"}`, `{"s":"𐀀"}`, true},
		{"re-encoded by encoding/json", `{"z":[1.50,"\u00e9"],"a":{"y":null,"b":2E0}}`, `{"a":{"b":2,"y":null},"z":[1.5,"é"]}`, true},
		{"top-level array", `[1,{"a":"x","b":true}]`, `[1.0,{"b":true,"a":"x"}]`, true},
		{"literals", `{"t":true,"f":false,"n":null}`, `{"n":null,"f":false,"t":true}`, true},

		// Other values.
		{"other string", `{"title":"Reviewed"}`, `{"title":"Unreviewed"}`, false},
		{"1 and \"1\"", `{"n":1}`, `{"n":"1"}`, false},
		{"number beyond float64", `{"n":9007199254740993}`, `{"n":9007199254740992}`, false},
		{"decimal beyond float64", `{"n":0.1000000000000000000001}`, `{"n":0.1}`, false},
		{"1 and 1.0000000000000000001", `{"n":1}`, `{"n":1.0000000000000000001}`, false},
		{"1e2 and 1e3", `{"n":1e2}`, `{"n":1e3}`, false},
		{"a member more", `{"a":1}`, `{"a":1,"b":1}`, false},
		{"a member less", `{"a":1,"b":1}`, `{"a":1}`, false},
		{"member renamed", `{"a":1}`, `{"b":1}`, false},
		{"names differ in case", `{"a":1}`, `{"A":1}`, false},
		{"array order", `[1,2]`, `[2,1]`, false},
		{"array length", `[1,2]`, `[1,2,2]`, false},
		{"null and missing", `{"a":null}`, `{}`, false},
		{"null and false", `{"a":null}`, `{"a":false}`, false},
		{"true and 1", `{"a":true}`, `{"a":1}`, false},
		{"object and array", `{"a":{}}`, `{"a":[]}`, false},
		{"string and array", `{"a":"x"}`, `{"a":["x"]}`, false},
		{"escape of another letter", `{"s":"\u0041"}`, `{"s":"B"}`, false},
		{"trailing space in a string", `{"s":"a"}`, `{"s":"a "}`, false},

		// Text whose value is not one: never the same call.
		{"duplicate names", `{"a":1,"a":2}`, `{"a":2}`, false},
		{"duplicate names, both", `{"a":1,"a":2}`, `{"a":1,"a":2}`, false},
		{"duplicate names, other order", `{"a":1,"a":2}`, `{"a":2,"a":1}`, false},
		{"duplicate names by escape", `{"a":1,"\u0061":1}`, `{"a":1}`, false},
		{"nested duplicate names", `{"x":{"a":1,"a":1}}`, `{"x":{"a":1}}`, false},
		{"not JSON", `{"a":1`, `{"a":1`, false},
		{"not JSON, one side", `{"a":1}`, `{"a":1,}`, false},
		{"two values", `{"a":1} {}`, `{"a":1}`, false},
		{"leading zero", `{"n":01}`, `{"n":1}`, false},

		// Strings that are not Unicode text (a lone surrogate, bytes not UTF-8) are the same only
		// as written: decoded, they all read U+FFFD.
		{"lone surrogates", `{"s":"\ud800"}`, `{"s":"\udc00"}`, false},
		{"lone surrogate and U+FFFD", `{"s":"\ud800"}`, `{"s":"\ufffd"}`, false},
		{"lone surrogate as written", `{"s":"\ud800"}`, `{"s":"\ud800"}`, true},
		{"high surrogate before a letter", `{"s":"\ud800\u0041"}`, `{"s":"\ufffdA"}`, false},
		{"high surrogate at the end", `{"s":"a\ud800"}`, `{"s":"a\ufffd"}`, false},
		{"low surrogate first", `{"s":"\udc00\ud800"}`, `{"s":"\ufffd\ufffd"}`, false},
		{"U+FFFD as written and escaped", `{"s":"\ufffd"}`, "{\"s\":\"\ufffd\"}", true},
		{"invalid UTF-8 and U+FFFD", "{\"s\":\"\xff\"}", `{"s":"\ufffd"}`, false},
		{"invalid UTF-8 bytes", "{\"s\":\"\xff\"}", "{\"s\":\"\xfe\"}", false},
		{"invalid UTF-8 as written", "{\"s\":\"\xff\"}", " {\"s\":\"\xff\"}", true},
		{"names not UTF-8", "{\"\xff\":1,\"\xfe\":1}", "{\"\xfe\":1,\"\xff\":1}", false},

		// Numbers beyond what is computed with exactly (numbers.go) are the same only as written.
		{"huge exponent as written", `{"n":1e999999}`, `{"n":1e999999}`, true},
		{"huge exponent otherwise", `{"n":1e999999}`, `{"n":10e999998}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, swap := range []bool{false, true} {
				x, y := tc.a, tc.b
				if swap {
					x, y = y, x
				}
				a := subjects.CallRequest{ID: "c", Tool: "s__t", Arguments: json.RawMessage(x)}
				b := subjects.CallRequest{ID: "c", Tool: "s__t", Arguments: json.RawMessage(y)}
				if got := sameCall("local", a, b); got != tc.same {
					t.Errorf("sameCall(%s, %s) = %v, want %v", x, y, got, tc.same)
				}
			}
		})
	}
}

// TestSameCallOtherThanArguments: the tool, the principal and whether arguments are given at
// all still decide.
func TestSameCallOtherThanArguments(t *testing.T) {
	base := subjects.CallRequest{ID: "c", Tool: "s__t", Arguments: json.RawMessage(`{"a":1}`),
		Principal: subjects.Principal{User: "u", Roles: []string{"r"}}}
	for _, tc := range []struct {
		name string
		edit func(*subjects.CallRequest)
		same bool
	}{
		{"itself", func(*subjects.CallRequest) {}, true},
		{"arguments reordered", func(r *subjects.CallRequest) { r.Arguments = json.RawMessage(` { "a" : 1.0 } `) }, true},
		{"tenant of the principal given", func(r *subjects.CallRequest) { r.Principal.Tenant = "local" }, true},
		{"another tool", func(r *subjects.CallRequest) { r.Tool = "s__u" }, false},
		{"another user", func(r *subjects.CallRequest) { r.Principal.User = "v" }, false},
		{"other roles", func(r *subjects.CallRequest) { r.Principal.Roles = []string{"r", "s"} }, false},
		{"another tenant", func(r *subjects.CallRequest) { r.Principal.Tenant = "other" }, false},
		{"no arguments", func(r *subjects.CallRequest) { r.Arguments = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := base
			other.Principal.Roles = append([]string(nil), base.Principal.Roles...)
			tc.edit(&other)
			if got := sameCall("local", base, other); got != tc.same {
				t.Errorf("sameCall = %v, want %v", got, tc.same)
			}
			if got := sameCall("local", other, base); got != tc.same {
				t.Errorf("sameCall (swapped) = %v, want %v", got, tc.same)
			}
		})
	}
	none := subjects.CallRequest{ID: "c", Tool: "s__t"}
	if !sameCall("local", none, none) {
		t.Error("two requests without arguments are not the same call")
	}
}

// TestSameCallDeepArguments: arguments as deep as the executor takes them (maxArgumentDepth
// levels) are compared; deeper ones (refused invalid_arguments before approval, so never met
// here; the bound keeps the comparison's work linear in the arguments) are never the same call,
// not even as the same text.
func TestSameCallDeepArguments(t *testing.T) {
	nest := func(levels int, open, close, inner string) json.RawMessage {
		return json.RawMessage(strings.Repeat(open, levels/2) + inner + strings.Repeat(close, levels/2))
	}
	req := func(args json.RawMessage) subjects.CallRequest {
		return subjects.CallRequest{ID: "c", Tool: "s__t", Arguments: args}
	}
	deepest := req(nest(maxArgumentDepth, `{"a":[`, "]}", "1"))
	if !sameCall("local", deepest, req(nest(maxArgumentDepth, `{ "a" : [ `, " ] }", "1.0"))) {
		t.Errorf("arguments %d levels deep written otherwise: not the same call", maxArgumentDepth)
	}
	if sameCall("local", deepest, req(nest(maxArgumentDepth, `{"a":[`, "]}", "2"))) {
		t.Errorf("arguments %d levels deep with another number: the same call", maxArgumentDepth)
	}
	deeper := req(nest(maxArgumentDepth+2, `{"a":[`, "]}", "1"))
	if sameCall("local", deeper, deeper) {
		t.Errorf("arguments deeper than %d levels: the same call", maxArgumentDepth)
	}
}

// TestApprovalSharedWithAReorderedResend: a resend of the same call whose arguments name their
// members in another order (as a client that re-encodes its request from a map does), past the
// de-duplication window while the first request waits for approval, was refused bad_request as
// "another call": its caller never learnt the call's outcome, and was told to use a new call id
// — a new request, for an approver to approve again, that would run the call a second time.
// It waits for the same approval: one approval decides both, the call runs once, and both
// callers get its answer.
func TestApprovalSharedWithAReorderedResend(t *testing.T) {
	r, ctx, first := reviewedWaitingPastDedup(t, "deploy-reordered")

	// The resend: the same call, its members in another order and a string escaped.
	resend := subjects.CallRequest{ID: first.ID, Tool: "ticketing__createIssue", Arguments: json.RawMessage(`{"priority":"low", "body":"b", "title":"\u0052eviewed"}`)}
	type answer struct {
		res subjects.CallResult
		err error
	}
	resent := make(chan answer, 1)
	go func() {
		res, err := r.client.CallDirect(ctx, "local", resend)
		resent <- answer{res, err}
	}()
	// Both requests wait for the one approval (a refusal is told the resend's caller at once).
	var early *answer
	waitFor(t, "the resend waiting for approval, or answered", func() bool {
		select {
		case a := <-resent:
			early = &a
			return true
		default:
			return r.approvalWaits(first.ID) == 2
		}
	})
	if early != nil {
		t.Fatalf("the resend was answered before any approval: %s %+v (%v)", early.res.Status, early.res.Error, early.err)
	}

	if rep, err := r.client.Decide(ctx, subjects.Approval{ID: first.ID, Approve: true, By: "ops", Reason: "reviewed"}); err != nil || !rep.OK {
		t.Fatalf("approve: %+v %v", rep, err)
	}
	got, err := r.client.Await(ctx, "local", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != subjects.CallOK || got.Error != nil {
		t.Errorf("the first request's answer: %s %+v, want ok", got.Status, got.Error)
	}
	a := <-resent
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.res.Status != subjects.CallOK || a.res.Error != nil {
		t.Errorf("the resend's answer: %s %+v, want the call's (ok)", a.res.Status, a.res.Error)
	}
	r.waitCallsSettled(ctx)
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets after one approval of one call, want 1", n)
	}
	approved := 0
	for _, ev := range r.auditEvents("local", first.ID) {
		if ev.Decision == subjects.CodeBadRequest {
			t.Errorf("a request refused: %s", ev.Message)
		}
		if ev.Decision == subjects.DecisionApproved {
			approved++
		}
	}
	if approved != 2 {
		t.Errorf("%d requests approved, want both (one approval decides every request of the call waiting)", approved)
	}
}
