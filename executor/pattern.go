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
// library call). The matches of one validation therefore share ecmaMatchTimeout (each is cut
// off at what is left of it, or at regexp2's backtracking stack limit): past it the validation
// stops (a stopValidation panic, recovered by meteredSchema.run) and the call is refused
// invalid_arguments, since other values may match quickly. The definition stays usable: a
// cut-off per match alone let arguments of many strings, each matching a little within it,
// keep one validation running past the backstop and its grace, which gives the definition up
// for every caller.

// ecmaMatchTimeout bounds the time one validation spends matching patterns only the ECMAScript
// engine compiles.
const ecmaMatchTimeout = time.Second

// compilePattern is the compiler's regexp engine: Go's regexp, else regexp2 (ECMAScript). The
// matches of a regexp2 pattern count against m's ECMAScript time (nil: each match has
// ecmaMatchTimeout of its own).
func compilePattern(pattern string, m *meteredSchema) (jsonschema.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err == nil {
		return re, nil
	}
	ecma, err2 := regexp2.Compile(pattern, regexp2.ECMAScript)
	if err2 != nil {
		return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err2)
	}
	ecma.MatchTimeout = ecmaMatchTimeout
	return ecmaPattern{ecma, m}, nil
}

// ecmaPattern is a pattern compiled by regexp2, for the compiled copy m (see meteredSchema):
// only the goroutine validating with m matches it.
type ecmaPattern struct {
	re *regexp2.Regexp
	m  *meteredSchema
}

func (p ecmaPattern) String() string { return p.re.String() }

// MatchString implements jsonschema.Regexp, which has no error to return: a match cut off
// stops the validation.
func (p ecmaPattern) MatchString(s string) bool {
	if p.m != nil {
		if p.m.ecmaLeft <= 0 {
			panic(stopValidation{pattern: p.re.String()})
		}
		p.re.MatchTimeout = p.m.ecmaLeft
		start := time.Now()
		defer func() { p.m.ecmaLeft -= time.Since(start) }()
	}
	ok, err := p.re.MatchString(s)
	if err != nil {
		panic(stopValidation{pattern: p.re.String()})
	}
	return ok
}
