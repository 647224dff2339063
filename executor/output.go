package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/mcpstream/mcpstream/jsonscan"
	"github.com/mcpstream/mcpstream/printable"
	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// Checking results against the outputSchema.
//
// MCP (2025-06-18 and later): a server whose tool declares an outputSchema MUST return
// structured results that conform to it, and clients SHOULD check them. The executor is the
// client. The result arrives after the tool ran, so nothing the check finds may read as "it did
// not run": a non-error result that has no structuredContent, or whose structuredContent the
// outputSchema rejects, is answered failed protocol_error (like any other malformed answer of a
// server: it is not retried, and a side-effecting call stays claimed), its message saying the call
// ran and where the result fails, Error.Path a JSON pointer into the MCP result
// ("/structuredContent/..."). The result is withheld from the caller (a failed answer carries
// none) and kept in the audit result event.
//
// The check runs against the definition the call was admitted against (call.tool: the one whose
// arguments were validated and whose annotations decided claiming), not one listed while the
// call ran. It is skipped for isError results (MCP does not ask a tool error to match the
// schema of the tool's output) and for tools that declare no outputSchema. The result is read
// as its readers read it (see structuredContents): a case-sensitive one takes the members named
// exactly isError and structuredContent, encoding/json members named so up to case. A result is
// an isError one only when it is to both, it has a structuredContent only when a case-sensitive
// reader finds one, and what each reader takes for it is checked.
//
// Output validation is a contract check for callers that read structuredContent (Code Mode
// stubs, programs), not a security boundary: a server can always return conforming nonsense. So
// a result the executor cannot judge is passed on as the server sent it, and the audit result
// event says why it was not checked: an outputSchema that cannot be used (it does not compile,
// is too large or a $ref cycle, or checking against it overran the step budget: then no later
// result of that definition is checked either, and the log says so once), a structuredContent
// nested more than maxResultDepth levels or holding a number beyond the bounds of numbers.go,
// a check that ran past the wall-clock backstop, or a string that took more than 1 s to match
// an ECMAScript pattern. Answering those protocol_error
// would make every call of a tool with a broken outputSchema run and then fail; refusing them
// before they run would disable a tool for a declaration that only describes its output.
//
// The check reuses the inputSchema machinery (schema.go): the same compiler (draft by $schema,
// no remote $ref, ECMA-262 patterns), the same bounds on the schema, the step meter and the
// wall-clock backstop, sized by the structuredContent (at most MaxResultBytes), and failure
// texts that never quote the values that failed. It sees the result as the connector passed it
// on, with the host's secrets already redacted: a structuredContent that fails and holds the
// redaction placeholder is passed on unchecked (the server's may have matched), as the audit
// result event says.

// maxResultDepth bounds how deeply a structuredContent may nest (the value itself is level 1)
// for the executor to check it: deeper ones are passed on unchecked. It bounds the recursion of
// decoding and validating, as maxArgumentDepth does for arguments, with room for real trees.
const maxResultDepth = 128

// maxOutputPath bounds Error.Path of a result that fails its outputSchema: a longer pointer
// (a server's property name can be long) is left out; the message still says where, cut.
const maxOutputPath = 1024

// outputCheck is what checking a result against its tool's outputSchema found.
type outputCheck struct {
	// fail is the answer when the result does not match the outputSchema: protocol_error.
	fail *subjects.Error
	// unchecked says why the result is passed on without being checked ("" when it was
	// checked, or there was nothing to check).
	unchecked string
	// unusable: the definition's outputSchema cannot be used (unchecked says why).
	unusable bool
}

// checkOutput checks the MCP result of a call of t (a JSON object) against t's outputSchema.
func checkOutput(t *tool, result []byte) outputCheck {
	return checkOutputWithin(t, result, defaultValidationLimits)
}

func checkOutputWithin(t *tool, result []byte, lim validationLimits) outputCheck {
	if t.OutputSchema == nil || isToolErrorToAll(result) {
		return outputCheck{}
	}
	c := &t.output
	if err := c.check(t.OutputSchema); err != nil {
		return unusableOutput(t, schemaErrorText(err))
	}
	if why := c.unusable.Load(); why != nil {
		return unusableOutput(t, *why)
	}
	members := structuredContents(result)
	if len(members) == 0 || members[0].name != "structuredContent" { // none to a case-sensitive reader
		return outputCheck{fail: &subjects.Error{Code: subjects.CodeProtocolError, Path: "/structuredContent",
			Message: ranBut(t) + "it has no structuredContent, which a tool that declares an outputSchema must return"}}
	}
	for _, m := range members {
		if out := checkStructured(t, m.name, m.value, lim); out.fail != nil || out.unchecked != "" {
			return out
		}
	}
	return outputCheck{}
}

// checkStructured checks one structuredContent value, the result's member name.
func checkStructured(t *tool, name string, value []byte, lim validationLimits) outputCheck {
	c := &t.output
	if nestsDeeper(value, maxResultDepth) {
		return outputCheck{unchecked: fmt.Sprintf("its structuredContent nests more than %d levels deep", maxResultDepth)}
	}
	if _, huge := firstHugeNumber(value); huge {
		return outputCheck{unchecked: "its structuredContent holds a number of " + hugeNumberText}
	}
	inst, err := decodeInstance(value)
	if err != nil { // (the result was found to be JSON: not expected)
		return outputCheck{unchecked: "its structuredContent could not be decoded: " + firstLine(err.Error())}
	}
	if c.uniqueItems {
		// (a result may echo a caller's arrays: see uniqueitems.go)
		if at, costly := costlyUniqueItems(inst, maxUniqueItemsCost); costly {
			return outputCheck{unchecked: fmt.Sprintf("its structuredContent has an array (at %s) whose items would cost the outputSchema's uniqueItems check more than %d comparisons",
				singleQuoted(truncateString(printable.Escape(pointer(at)), 200)), maxUniqueItemsCost)}
		}
	}
	res, wall, err := c.metered(t.OutputSchema, inst, len(value), lim, "a result")
	switch {
	case err != nil: // it compiled once: it does again
		return unusableOutput(t, schemaErrorText(err))
	case res.overran:
		// Only this result goes unchecked: elapsed time also measures the machine's load.
		return outputCheck{unchecked: fmt.Sprintf("checking it against the outputSchema took longer than %v (a busy executor, or a costly schema)", wall)}
	case res.stopped != nil && res.stopped.pattern != "":
		return outputCheck{unchecked: fmt.Sprintf("the strings of its structuredContent took too long to match the outputSchema's pattern %s (matching is cut off after %v per result)",
			singleQuoted(truncateString(res.stopped.pattern, 200)), ecmaMatchTimeout)}
	case res.stopped != nil && res.stopped.uniqueAt != nil:
		// (a result may echo a caller's arrays: see uniqueitems.go)
		at, _ := arrayAt(inst, res.stopped.uniqueAt)
		return outputCheck{unchecked: fmt.Sprintf("its structuredContent has an array (at %s) whose items would cost the outputSchema's uniqueItems check more than %d comparisons",
			singleQuoted(truncateString(printable.Escape(pointer(at)), 200)), maxUniqueItemsCost)}
	case res.stopped != nil && res.stopped.overBudget:
		return unusableOutput(t, c.refuse(overBudgetText("a result", res.limit)))
	case res.stopped != nil:
		return unusableOutput(t, *c.unusable.Load()) // another call found it unusable meanwhile
	case res.regexUnchecked.why != "":
		// Not judged either way (see validationOutcome.regexUnchecked).
		return outputCheck{unchecked: "its structuredContent holds a string to check as a 'regex' that " + res.regexUnchecked.why}
	case res.err == nil:
		return outputCheck{}
	case bytes.Contains(value, []byte(redact.Placeholder)):
		// The connector took a configured secret out of it: what fails may be the
		// placeholder (in a pattern, a type, a property name), not what the server sent.
		return outputCheck{unchecked: "its structuredContent held a secret value the host redacted, which may be what fails the outputSchema"}
	}
	fail := &subjects.Error{Code: subjects.CodeProtocolError, Path: "/" + name, Message: ranBut(t) + "its structuredContent does not match the outputSchema"}
	var ve *jsonschema.ValidationError
	if !errors.As(res.err, &ve) {
		return outputCheck{fail: fail}
	}
	// The texts of the inputSchema's failures: they never quote the values that failed, which
	// may be secrets of the result as well as of arguments.
	issues := argumentIssues(ve)
	for i, is := range issues {
		if k, ok := is.kind.(*kind.RefCycle); ok {
			return unusableOutput(t, c.refuse(refCycleText(relativeLocations(k.URL))))
		}
		issues[i].at = append([]string{name}, is.at...) // a pointer into the MCP result
	}
	if len(issues) > 0 {
		fail.Path, fail.Message = issuesPath(issues), ranBut(t)+issuesMessage(issues)
	}
	return outputCheck{fail: fail}
}

// ranBut starts the message of a result that fails t's outputSchema: the call ran, and its
// result is not passed on.
func ranBut(t *tool) string {
	return "the call ran, but its result does not match the outputSchema of " + t.Public + " and is withheld (the audit result event keeps it): "
}

// unusableOutput is the check of a result of t whose outputSchema cannot be used: passed on.
func unusableOutput(t *tool, why string) outputCheck {
	return outputCheck{unusable: true, unchecked: "the outputSchema of " + t.Public + " cannot be used: " + why}
}

// schemaErrorText is what is wrong with a schema that does not compile, without the
// "invalid input schema" its error starts with.
func schemaErrorText(err error) string {
	var ise *invalidSchemaError
	if errors.As(err, &ise) {
		return ise.text
	}
	return firstLine(err.Error())
}

// structuredMember is a member of an MCP result that holds its structuredContent.
type structuredMember struct {
	name  string
	value json.RawMessage
}

// structuredContents returns the members of the MCP result that its readers take for its
// structuredContent: the last one named so exactly, which a case-sensitive reader (JavaScript,
// Python: MCP's JSON is case-sensitive) takes, first, then the last one named so up to case,
// which encoding/json (and so a Go client such as mcp-go) takes, when that is another member.
// None when the result has no such member. Members no reader takes are not checked: a result
// may spell the name in 2^16 × 3 ways ("ſ" folds to "s"), and checking each, with the whole
// budget of a result, held a worker for as long as the server liked.
func structuredContents(result []byte) []structuredMember {
	var exact, folded *structuredMember
	ok := jsonscan.Members(result, func(rawName, value []byte) {
		name, ok := jsonscan.Name(rawName)
		if !ok || !strings.EqualFold(name, "structuredContent") {
			return
		}
		m := &structuredMember{name: name, value: value}
		if name == "structuredContent" {
			exact = m
		}
		folded = m
	})
	if !ok {
		return nil
	}
	var out []structuredMember
	if exact != nil {
		out = append(out, *exact)
	}
	if folded != nil && folded != exact {
		out = append(out, *folded)
	}
	return out
}

// isToolErrorToAll reports whether every reader of an MCP result takes it for a tool error:
// encoding/json (isToolError: the last member named isError up to case) and a case-sensitive
// reader (the last member named exactly isError). A result that is a tool error to one only
// is a result whose structuredContent the other reads.
func isToolErrorToAll(result []byte) bool {
	if !isToolError(result) {
		return false
	}
	var members map[string]json.RawMessage
	return json.Unmarshal(result, &members) == nil && isTrue(members["isError"])
}
