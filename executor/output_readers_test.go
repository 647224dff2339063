package executor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// caseVariants returns n spellings of word (ASCII letters) that differ only in the case of its
// letters, the first all lower case.
func caseVariants(word string, n int) []string {
	var out []string
	for mask := 0; len(out) < n; mask++ {
		b := []byte(strings.ToLower(word))
		for i := range b {
			if mask&(1<<i) != 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			}
		}
		out = append(out, string(b))
	}
	return out
}

// A result is checked as its readers read it, and only so: a case-sensitive reader
// (JavaScript, Python: MCP's JSON is case-sensitive) takes the last member named exactly
// structuredContent or isError, encoding/json (Go, mcp-go) the last one named so up to case.
// A result is a tool error, passed unchecked, only when it is one to both; it has a
// structuredContent only when a case-sensitive reader finds one.
func TestOutputSchemaReaders(t *testing.T) {
	tl := &tool{Public: "s__t", OutputSchema: []byte(reportSchema)}
	good, bad := `{"runs":1,"ref":"R-1"}`, `{"runs":"1","ref":"R-1"}`
	for result, path := range map[string]string{
		// none to a case-sensitive reader
		`{"content":[],"structuredcontent":` + good + `}`: "/structuredContent",
		// a tool error to Go only: to a case-sensitive reader a result whose structuredContent fails
		`{"content":[],"IsError":true,"structuredContent":` + bad + `}`: "/structuredContent/runs",
		// a tool error to Go only, though a case-sensitive reader finds isError false
		`{"content":[],"isError":false,"IsError":true,"structuredContent":` + bad + `}`: "/structuredContent/runs",
		// a tool error to a case-sensitive reader only
		`{"content":[],"isError":true,"ISERROR":false,"structuredContent":` + bad + `}`: "/structuredContent/runs",
		// a tool error to every reader
		`{"content":[],"isError":true,"IsError":true,"structuredContent":` + bad + `}`: "",
		// what encoding/json takes fails
		`{"content":[],"structuredContent":` + good + `,"StructuredContent":` + bad + `}`: "/StructuredContent/runs",
		// a member no reader takes
		`{"content":[],"structuredContent":` + good + `,"StructuredContent":` + bad + `,"STRUCTUREDCONTENT":` + good + `}`: "",
	} {
		out := checkOutput(tl, []byte(result))
		switch {
		case out.unchecked != "":
			t.Errorf("%s: unchecked (%s)", result, out.unchecked)
		case out.fail == nil && path != "":
			t.Errorf("%s: passed, want a failure at %s", result, path)
		case out.fail != nil && out.fail.Path != path:
			t.Errorf("%s: failed at %q (%s), want %q", result, out.fail.Path, out.fail.Message, path)
		}
	}
}

// A result is checked at most twice (what each kind of reader takes), however many members
// spell structuredContent in other cases (2^16 × 3 spellings, "ſ" included): each check has the
// whole budget of a result, and a 46 KB result of 1,000 spellings, each checked, held a worker
// for 44 s against an outputSchema whose check costs 100,000 steps.
func TestOutputSchemaCaseVariantsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"content":[],"structuredContent":{"runs":1,"ref":"R-1"}`)
	for i, v := range caseVariants("structuredContent", 2000) {
		fmt.Fprintf(&b, `,"%s":{"runs":%d,"ref":"R-1"}`, v, i+1)
	}
	b.WriteString(`}`)
	members := structuredContents([]byte(b.String()))
	if len(members) > 2 {
		t.Fatalf("%d members to check, want at most 2", len(members))
	}
	var names []string
	for _, m := range members {
		names = append(names, m.name)
	}
	if want := []string{"structuredContent", caseVariants("structuredContent", 2000)[1999]}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("checked %v, want %v (exact, and the last one up to case)", names, want)
	}
}

// A result the connector redacted (it held a configured secret) is not the server's result: a
// conforming one may fail the outputSchema once "[redacted]" stands in a value (a pattern, a
// type, a property name). It is passed on redacted, unchecked, and the audit result event says
// why — not answered protocol_error as if the server had broken its contract.
func TestOutputSchemaRedactedResult(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, secrets: []string{reportSecret}})
	r.waitTool("fixture__report")
	res := r.call("local", "fixture__report", `{"mode":"secret"}`)
	if res.Status != subjects.CallOK || res.Error != nil {
		t.Fatalf("got %s %+v, want ok with the redacted result", res.Status, res.Error)
	}
	if strings.Contains(string(res.Result), reportSecret) || !strings.Contains(string(res.Result), redact.Placeholder) {
		t.Fatalf("result %.300s: want it redacted", res.Result)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "audit result event", func() bool { evs = r.auditEvents("local", res.ID); return hasResultEvent(evs) })
	if msg := evs[len(evs)-1].Message; !strings.Contains(msg, "redacted") || !strings.Contains(msg, "without checking it") {
		t.Errorf("audit result message %q, want it to say the redacted result was not checked", msg)
	}
	// A result that fails without a redaction is still answered protocol_error.
	if res := r.call("local", "fixture__report", `{"mode":"wrong"}`); res.Status != subjects.CallFailed || res.Error == nil || res.Error.Code != subjects.CodeProtocolError {
		t.Fatalf("mode wrong: got %s %+v, want protocol_error", res.Status, res.Error)
	}
}
