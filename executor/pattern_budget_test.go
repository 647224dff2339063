package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestECMAPatternTimeIsPerCall: a pattern only the ECMAScript engine compiles had each of its
// matches cut off after ecmaMatchTimeout, but not the matches of one call together: arguments
// holding many strings that each take a little less than the cut-off kept the validation
// running past the backstop and its grace, and the definition became unusable for every caller
// — one caller's arguments disabled the tool, where the cut-off is meant to refuse that call
// only. The matches of one validation share the cut-off: past it the call is refused
// invalid_arguments and the definition stays usable.
func TestECMAPatternTimeIsPerCall(t *testing.T) {
	// (?=a) makes the pattern ECMAScript only; (a+)+b backtracks exponentially on a's alone.
	tl := &tool{Public: "sloppy__t", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string","pattern":"^(?=a)(a+)+b$"}}}}`)}
	// Each string takes milliseconds (far below the cut-off); 600 of them take seconds.
	names := make([]string, 600)
	for i := range names {
		names[i] = strings.Repeat("a", 18)
	}
	args, _ := json.Marshal(map[string]any{"names": names})
	lim := validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: 100 * time.Millisecond, grace: ecmaMatchTimeout + 2*time.Second}
	e := validateWithin(t, tl, string(args), lim)
	if e == nil || e.Code == subjects.CodeInvalidSchema {
		t.Fatalf("got %+v, want the call refused (invalid_arguments, or unavailable at the backstop)", e)
	}
	c := &tl.schema
	waitFor(t, "the validation to end, or the definition to be given up", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.idle) > 0 || c.unusable.Load() != nil
	})
	if why := c.unusable.Load(); why != nil {
		t.Fatalf("one call's arguments made the definition unusable for everyone: %s", *why)
	}
	if e := validateWithin(t, tl, `{"names":["aab"]}`, defaultValidationLimits); e != nil {
		t.Errorf("next call: got %+v, want valid", e)
	}
}
