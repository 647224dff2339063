package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A result is checked against the outputSchema of the definition its call was admitted
// against, through the NATS API against the fixture's report tools (which do not check their
// own output): a non-error result whose structuredContent does not match, or that has none, is
// answered failed protocol_error with a path into the result and a message saying the call ran;
// the audit result event keeps the server's result. An isError result, and a result the
// executor cannot judge (an outputSchema that does not compile, a structuredContent nested past
// maxResultDepth), are passed on as the server sent them. No call runs twice.
func TestOutputSchema(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture", "ticketing"}})
	r.waitTool("fixture__report_broken")

	// A demo server's tool (mcp-go checks its output before sending it) passes the check.
	if res := r.call("local", "ticketing__listIssues", `{}`); res.Status != subjects.CallOK || res.Error != nil {
		t.Fatalf("ticketing__listIssues: got %s %+v, want ok", res.Status, res.Error)
	}
	if tl := r.ex.reg.lookup("ticketing__listIssues"); tl == nil || len(tl.OutputSchema) == 0 || !checked(tl) {
		t.Fatal("ticketing__listIssues: its result was not checked against its outputSchema")
	}

	cases := []struct {
		tool, mode string
		status     string // ok, or failed protocol_error
		path       string // the failure's path (failed)
		contains   string // in the message (failed), or in the audit result event's message (ok)
		isError    bool
	}{
		{tool: "report", mode: "ok", status: subjects.CallOK},
		{tool: "report", mode: "wrong", status: subjects.CallFailed, path: "/structuredContent/runs", contains: "got string, want integer"},
		{tool: "report", mode: "pattern", status: subjects.CallFailed, path: "/structuredContent/ref", contains: "does not match pattern '^(?!X)R-[0-9]+$'"},
		{tool: "report", mode: "missing", status: subjects.CallFailed, path: "/structuredContent", contains: "no structuredContent"},
		{tool: "report", mode: "null", status: subjects.CallFailed, path: "/structuredContent", contains: "got null, want object"},
		{tool: "report", mode: "error", status: subjects.CallOK, isError: true},
		{tool: "report", mode: "deep", status: subjects.CallOK, contains: fmt.Sprintf("nests more than %d levels", maxResultDepth)},
		{tool: "report", mode: "big", status: subjects.CallOK},
		{tool: "report", mode: "bigwrong", status: subjects.CallFailed, path: "/structuredContent/items/199999", contains: "got number, want string"},
		{tool: "report_any", mode: "wrong", status: subjects.CallOK},
		{tool: "report_any", mode: "missing", status: subjects.CallFailed, path: "/structuredContent", contains: "no structuredContent"},
		{tool: "report_none", mode: "ok", status: subjects.CallFailed, path: "/structuredContent", contains: "false schema"},
		{tool: "report_none", mode: "error", status: subjects.CallOK, isError: true},
		{tool: "report_broken", mode: "wrong", status: subjects.CallOK, contains: "outputSchema of fixture__report_broken cannot be used"},
	}
	answers := map[string]subjects.CallResult{}
	for i, tc := range cases {
		t.Run(tc.tool+"/"+tc.mode, func(t *testing.T) {
			id := fmt.Sprintf("out-%d", i)
			res := r.call("local", "fixture__"+tc.tool, `{"mode":"`+tc.mode+`"}`, func(c *subjects.CallRequest) { c.ID = id })
			answers[id] = res
			if res.Status != tc.status {
				t.Fatalf("got %s %+v, want %s", res.Status, res.Error, tc.status)
			}
			var evs []subjects.AuditEvent
			waitFor(t, "audit result event", func() bool { evs = r.auditEvents("local", id); return hasResultEvent(evs) })
			last := evs[len(evs)-1]
			if tc.status == subjects.CallOK {
				if res.Error != nil || len(res.Result) == 0 || isToolError(res.Result) != tc.isError {
					t.Fatalf("got error %+v, result %.200s; want the server's result (isError %v)", res.Error, res.Result, tc.isError)
				}
				if tc.contains != "" && !strings.Contains(last.Message, tc.contains) {
					t.Errorf("audit result message %q, want it to say %q", last.Message, tc.contains)
				}
				if tc.contains == "" && last.Message != "" {
					t.Errorf("audit result message %q, want none", last.Message)
				}
				return
			}
			e := res.Error
			if e == nil || e.Code != subjects.CodeProtocolError || e.Path != tc.path || !strings.Contains(e.Message, tc.contains) ||
				!strings.Contains(e.Message, "the call ran") || !strings.Contains(e.Message, "fixture__"+tc.tool) {
				t.Fatalf("got %+v, want protocol_error at %s saying the call ran and %q", e, tc.path, tc.contains)
			}
			if len(res.Result) != 0 {
				t.Errorf("a failed answer carries a result: %.200s", res.Result)
			}
			var decided bool
			for _, ev := range evs {
				decided = decided || ev.Type == "audit."+subjects.AuditDecision && ev.Code == subjects.CodeProtocolError
			}
			if !decided || last.Code != subjects.CodeProtocolError || last.Message != e.Message || last.ResBytes == 0 || len(last.Result) == 0 {
				t.Errorf("audit: decision %v, result event %+v; want protocol_error with the server's result", decided, last)
			}
		})
	}

	// Answered once: a resend of a failed call gets its answer again, and nothing ran again —
	// every call above ran exactly once (the tools share one run counter).
	again := r.call("local", "fixture__report", `{"mode":"wrong"}`, func(c *subjects.CallRequest) { c.ID = "out-1" })
	if !again.Duplicate || again.Error == nil || *again.Error != *answers["out-1"].Error {
		t.Errorf("resend: got %+v (duplicate %v), want the first answer %+v", again.Error, again.Duplicate, answers["out-1"].Error)
	}
	last := r.call("local", "fixture__report", `{"mode":"ok"}`)
	var got struct {
		StructuredContent struct {
			Runs int `json:"runs"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(last.Result, &got); err != nil || got.StructuredContent.Runs != len(cases)+1 {
		t.Errorf("run %d (%v), want %d: a call ran twice or not at all", got.StructuredContent.Runs, err, len(cases)+1)
	}
}

// checked reports whether a result of tl was checked against its outputSchema: a compiled copy
// of it went back to the pool after a validation.
func checked(tl *tool) bool {
	tl.output.mu.Lock()
	defer tl.output.mu.Unlock()
	return len(tl.output.idle) > 0
}

// A result is checked against the definition its call was admitted against: a server that lists
// another outputSchema while the call runs changes the check of later calls, not of this one.
func TestOutputSchemaOfAdmittedDefinition(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	r.waitTool("fixture__report")
	release := filepath.Join(r.dir, "release")

	answer := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "held", Tool: "fixture__report",
			Arguments: json.RawMessage(`{"mode":"ok","wait":` + strconv.Quote(release) + `}`), Principal: subjects.Principal{User: "local"}})
		if err != nil {
			res.Error = &subjects.Error{Code: "test", Message: err.Error()}
		}
		answer <- res
	}()
	waitFor(t, "the call dispatched", func() bool {
		for _, ev := range r.auditEvents("local", "held") {
			if ev.Type == "audit."+subjects.AuditDispatch {
				return true
			}
		}
		return false
	})

	// The server lists report again, now declaring outputSchema false (nothing matches).
	ttl := int64(400_000)
	r.publishRegistry(subjects.RegistrySnapshot("fixture", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "fixture", Kind: subjects.KindTools, Fingerprint: "fp-false", ListedAt: time.Now(), TTLMs: &ttl,
		Items: []json.RawMessage{json.RawMessage(`{"name":"report","inputSchema":{"type":"object","properties":{"mode":{"type":"string"},"wait":{"type":"string"}}},"outputSchema":false}`)}})
	waitFor(t, "the new definition applied", func() bool {
		tl := r.ex.reg.lookup("fixture__report")
		return tl != nil && string(tl.OutputSchema) == "false"
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-answer; res.Status != subjects.CallOK || res.Error != nil {
		t.Fatalf("the call admitted before the re-list: got %s %+v, want ok (checked against the schema it was admitted with)", res.Status, res.Error)
	}
	later := r.call("local", "fixture__report", `{"mode":"ok"}`)
	if later.Status != subjects.CallFailed || later.Error == nil || later.Error.Code != subjects.CodeProtocolError || !strings.Contains(later.Error.Message, "false schema") {
		t.Fatalf("a call admitted after the re-list: got %s %+v, want protocol_error against outputSchema false", later.Status, later.Error)
	}
}

// What the check cannot decide passes the result on: an outputSchema whose checks overrun the
// step budget is remembered unusable (every later result of the definition passes unchecked at
// once); a pattern match cut off after 1 s, or a check cut off by the wall-clock backstop,
// passes that one result only.
func TestOutputSchemaGuard(t *testing.T) {
	result := func(sc string) []byte { return []byte(`{"content":[],"structuredContent":` + sc + `}`) }
	lim := validationLimits{steps: 5000, stepsPerNode: 0, wall: time.Hour}

	tl := &tool{Public: "evil__t", OutputSchema: []byte(explodingSchema)}
	if out := checkOutputWithin(tl, result(`{"x":[[1]]}`), lim); out.fail == nil || out.fail.Path != "/structuredContent/x/0/0" {
		t.Fatalf("a shallow mismatch: got %+v, want protocol_error at /structuredContent/x/0/0", out)
	}
	out := checkOutputWithin(tl, result(nestedArgs(40)), lim)
	if out.fail != nil || !out.unusable || !strings.Contains(out.unchecked, "more than 5000 steps") {
		t.Fatalf("an exploding check: got %+v, want it passed on unchecked, the outputSchema unusable", out)
	}
	again := checkOutputWithin(tl, result(`{"x":[[1]]}`), lim)
	if again.fail != nil || again.unchecked != out.unchecked {
		t.Fatalf("after it: got %+v, want every result passed on unchecked (%q)", again, out.unchecked)
	}

	// A string that takes too long to match an ECMAScript-only pattern: that result passes
	// unchecked, and the outputSchema stays usable for values that match quickly.
	ecma := &tool{Public: "s__t", OutputSchema: []byte(`{"type":"string","pattern":"^(?=a)(a+)+$"}`)}
	out = checkOutputWithin(ecma, result(`"`+strings.Repeat("a", 40)+`!"`), validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: time.Hour})
	if out.fail != nil || out.unusable || !strings.Contains(out.unchecked, "^(?=a)(a+)+$") {
		t.Fatalf("a catastrophic pattern: got %+v, want that result passed on unchecked", out)
	}
	if out := checkOutput(ecma, result(`"b"`)); out.fail == nil || out.fail.Path != "/structuredContent" {
		t.Fatalf("a quick failing value after: got %+v, want protocol_error at /structuredContent", out)
	}

	// A backstop no check can meet, a grace any can: that result passes unchecked, the
	// definition stays usable (elapsed time also measures the machine's load).
	busy := &tool{Public: "s__t", OutputSchema: []byte(`{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"}}`)}
	rows := `[` + strings.TrimSuffix(strings.Repeat(`"abcdefgh",`, 20_000), ",") + `]`
	out = checkOutputWithin(busy, result(rows), validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: time.Nanosecond, grace: time.Minute})
	if out.fail != nil || out.unusable || !strings.Contains(out.unchecked, "took longer than") {
		t.Fatalf("a check past the backstop: got %+v, want that result passed on unchecked", out)
	}
	waitUntilTrue(t, "the copy given back", func() bool { return checked(busy) })
	if why := busy.output.unusable.Load(); why != nil {
		t.Fatalf("harmless outputSchema disabled: %s", *why)
	}
	if out := checkOutput(busy, result(`["ok", 1]`)); out.fail == nil || out.fail.Path != "/structuredContent/1" {
		t.Fatalf("next result: got %+v, want it checked (protocol_error at /structuredContent/1)", out)
	}
}

// The outputSchema is read by its exact member name (null declares none), and the members a
// reader takes for the result's structuredContent (its exact name; for a Go client, its name up
// to case) are checked (see TestOutputSchemaReaders).
func TestOutputSchemaMembers(t *testing.T) {
	for def, want := range map[string]string{
		`{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}`:                     `{"type":"object"}`,
		`{"name":"a","inputSchema":{"type":"object"},"outputSchema":false}`:                                 `false`,
		`{"name":"a","inputSchema":{"type":"object"},"outputSchema":null}`:                                  ``,
		`{"name":"a","inputSchema":{"type":"object"},"OutputSchema":{"type":"string"}}`:                     ``,
		`{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"string"},"OUTPUTSCHEMA":true}`: `{"type":"string"}`,
	} {
		tl, ok := parseTool("s", "fp", json.RawMessage(def))
		if !ok || string(tl.OutputSchema) != want {
			t.Errorf("%s: outputSchema %s, want %q", def, tl.OutputSchema, want)
		}
	}
	tl := &tool{Public: "s__t", OutputSchema: []byte(reportSchema)}
	for result, path := range map[string]string{
		`{"content":[],"structuredContent":{"runs":1,"ref":"R-1"}}`:                                  "",
		`{"content":[],"structuredContent":{"runs":1,"ref":"R-1"},"StructuredContent":{"runs":"1"}}`: "/StructuredContent/ref",
		`{"content":[],"structuredcontent":{"runs":1,"ref":"R-1"}}`:                                  "/structuredContent", // none to a case-sensitive reader
		`{"content":[],"structuredContent":{"runs":"1"},"structuredContent":{"runs":1,"ref":"R-1"}}`: "",                   // the last one counts
		`{"content":[],"isError":false}`:                                                             "/structuredContent",
		`{"content":[],"isError":true}`:                                                              "",
		`{"content":[],"isError":true,"structuredContent":{"runs":"1"}}`:                             "",
	} {
		out := checkOutput(tl, []byte(result))
		switch {
		case out.fail == nil && (path != "" || out.unchecked != ""):
			t.Errorf("%s: passed (unchecked: %q), want a failure at %s", result, out.unchecked, path)
		case out.fail != nil && out.fail.Path != path:
			t.Errorf("%s: failed at %q (%s), want %q", result, out.fail.Path, out.fail.Message, path)
		}
	}
}
