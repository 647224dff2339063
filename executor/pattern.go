package executor

import (
	"fmt"
	"regexp"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Patterns of an inputSchema ("pattern", "patternProperties", "format": "regex") are ECMA-262
// regular expressions (JSON Schema says so, and MCP servers written in TypeScript use
// lookarounds, backreferences and \u escapes freely). Go's regexp compiles most of them, in
// linear time, and is tried first; a pattern it refuses is compiled by regexp2 in its ECMAScript
// mode instead of making the tool uncallable. regexp2 backtracks: a pattern such as ^(a+)+$ can
// take exponential time on a crafted value, which the step meter cannot see (a match is one
// library call). Each such match is therefore cut off after ecmaMatchTimeout (or regexp2's
// backtracking stack limit): the validation stops (a patternOverrun panic, recovered by
// meteredSchema.run) and the call is refused invalid_arguments, since another value may match
// quickly. The definition stays usable.

// ecmaMatchTimeout bounds one match of a pattern only the ECMAScript engine compiles.
const ecmaMatchTimeout = time.Second

// compilePattern is the compiler's regexp engine: Go's regexp, else regexp2 (ECMAScript).
func compilePattern(pattern string) (jsonschema.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err == nil {
		return re, nil
	}
	ecma, err2 := regexp2.Compile(pattern, regexp2.ECMAScript)
	if err2 != nil {
		return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err2)
	}
	ecma.MatchTimeout = ecmaMatchTimeout
	return ecmaPattern{ecma}, nil
}

// ecmaPattern is a pattern compiled by regexp2.
type ecmaPattern struct{ re *regexp2.Regexp }

func (p ecmaPattern) String() string { return p.re.String() }

// MatchString implements jsonschema.Regexp, which has no error to return: a match cut off
// stops the validation.
func (p ecmaPattern) MatchString(s string) bool {
	ok, err := p.re.MatchString(s)
	if err != nil {
		panic(stopValidation{pattern: p.re.String()})
	}
	return ok
}
