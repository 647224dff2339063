package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// explodingSchema re-evaluates every array level along two paths: validation work grows like
// the Fibonacci numbers with the nesting of x (depth 24: 0.2 s; 40: hours, unguarded).
const explodingSchema = `{"type":"object","properties":{"x":{"$ref":"#/properties/x/items","items":{"type":"array","items":{"$ref":"#/properties/x"}}}}}`

func nestedArgs(depth int) string {
	return `{"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
}

// guardWatchdog is the generous bound past which a test that would otherwise hang fails: the
// outcome of every guard test is decided by counts and codes, never by this.
const guardWatchdog = 2 * time.Minute

// validateWithin runs validateArgumentsWithin, failing the test if it does not return within
// the watchdog.
func validateWithin(t *testing.T, tl *tool, args string, lim validationLimits) *subjects.Error {
	t.Helper()
	done := make(chan *subjects.Error, 1)
	go func() { done <- validateArgumentsWithin(tl, []byte(args), lim) }()
	select {
	case e := <-done:
		return e
	case <-time.After(guardWatchdog):
		t.Fatalf("validating %d bytes of arguments did not return in %v", len(args), guardWatchdog)
		return nil
	}
}

func wantCode(t *testing.T, e *subjects.Error, code, contains string) {
	t.Helper()
	if e == nil || e.Code != code || !strings.Contains(e.Message, contains) {
		t.Fatalf("got %+v, want %s containing %q", e, code, contains)
	}
}

// The reviewer's reproduction: 110 bytes of arguments against a 100-byte schema must not hold a
// worker. With the default limits the step budget refuses it (about 270k evaluations): that
// call only, the arguments chose the work.
func TestSchemaGuardReviewBlowup(t *testing.T) {
	tl := &tool{Public: "evil__t", InputSchema: []byte(explodingSchema)}
	done := make(chan *subjects.Error, 1)
	go func() { done <- validateArguments(tl, []byte(nestedArgs(40))) }()
	var got *subjects.Error
	select {
	case got = <-done:
	case <-time.After(guardWatchdog):
		t.Fatal("validating 110 bytes did not return")
	}
	wantCode(t, got, subjects.CodeInvalidArguments, "more than")
	// Not remembered: a call with arguments that nest less is validated as ever.
	if again := validateArguments(tl, []byte(nestedArgs(3))); again != nil {
		t.Fatalf("second call: got %+v, want valid", again)
	}
}

// unionTreeSchema is an expression tree whose every level tries each of 10 kinds of node (a
// recursive union, as filter and query tools declare): the validator's work multiplies with
// each level the arguments nest.
func unionTreeSchema() string {
	var kinds []string
	for i := range 10 {
		kinds = append(kinds, fmt.Sprintf(`{"type":"object","properties":{"op":{"const":"k%d"},"args":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["op"]}`, i))
	}
	return `{"type":"object","properties":{"where":{"$ref":"#/$defs/node"}},"$defs":{"node":{"anyOf":[` + strings.Join(kinds, ",") + `]}}}`
}

// unionTree is arguments of unionTreeSchema, a tree nested depth levels.
func unionTree(depth int) string {
	n := `{"op":"k9"}`
	for range depth {
		n = `{"op":"k9","args":[` + n + `]}`
	}
	return `{"where":` + n + `}`
}

// An expression tree whose every level tries each kind of node (a recursive union, as filter
// and query tools declare): arguments nested deep overrun the step budget. One caller's deep
// tree made the definition unusable, and every other caller's calls of the tool were refused
// invalid_schema until the server listed another; only that call is refused now.
func TestSchemaGuardDeepUnionRefusesOnlyTheCall(t *testing.T) {
	schema, tree := unionTreeSchema(), unionTree
	tl := &tool{Public: "db__query", InputSchema: []byte(schema)}
	lim := validationLimits{steps: 5000, stepsPerNode: 0, wall: time.Hour}
	if e := validateWithin(t, tl, tree(1), lim); e != nil {
		t.Fatalf("a shallow tree: got %+v, want valid", e)
	}
	wantCode(t, validateWithin(t, tl, tree(8), lim), subjects.CodeInvalidArguments, "more than 5000 steps")
	if tl.schema.unusable.Load() != nil {
		t.Fatalf("the definition was made unusable: %s", *tl.schema.unusable.Load())
	}
	if e := validateWithin(t, tl, tree(1), lim); e != nil {
		t.Fatalf("a shallow tree after a deep one: got %+v, want valid", e)
	}
	if e := validateWithin(t, tl, `{"where":{"op":"nope"}}`, lim); e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/where" {
		t.Fatalf("a node of no kind: got %+v, want invalid_arguments at /where", e)
	}
}

// TestSchemaGuardCostlyArgumentsPastGrace: arguments within the step budget whose validation
// still ran past the backstop's grace made the definition unusable for every caller. The budget
// grows with the arguments (256 steps per JSON value, a recursive union's step ~3 µs): ~100,000
// values of padding (200 KB) let one caller's deep tree run past 3 s + 1 min, the cross-tenant
// denial of service the step budget's per-call refusal meant to close. The validation is now
// stopped at its next step instead, its copy given back; the definition stays usable.
func TestSchemaGuardCostlyArgumentsPastGrace(t *testing.T) {
	tl := &tool{Public: "db__query", InputSchema: []byte(unionTreeSchema())}
	deep := unionTree(9) // ~20 million steps: a minute
	// A budget the tree stays within (as padding's JSON values buy it), a backstop and grace it
	// runs past.
	lim := validationLimits{steps: 1000, stepsPerNode: 1 << 30, wall: 50 * time.Millisecond, grace: 400 * time.Millisecond}
	wantCode(t, validateWithin(t, tl, deep, lim), subjects.CodeUnavailable, "took longer than 50ms")
	waitUntilTrue(t, "the copy given back or the definition unusable", func() bool {
		tl.schema.mu.Lock()
		defer tl.schema.mu.Unlock()
		return len(tl.schema.idle) > 0 || tl.schema.unusable.Load() != nil
	})
	if why := tl.schema.unusable.Load(); why != nil {
		t.Fatalf("one caller's arguments disabled the definition: %s", *why)
	}
	if e := validateWithin(t, tl, `{"where":{"op":"k1"}}`, lim); e != nil {
		t.Fatalf("next call: %+v", e)
	}
}

// TestSchemaGuardMixedConcurrentCalls: concurrent calls of one definition, some over the step
// budget, some cut off past the backstop's grace, some fine: each gets its own answer, and the
// definition stays usable (run under -race: the copies go from call to call).
func TestSchemaGuardMixedConcurrentCalls(t *testing.T) {
	schema, tree := unionTreeSchema(), unionTree
	tl := &tool{Public: "db__query", InputSchema: []byte(schema)}
	budget := validationLimits{steps: 5000, wall: time.Hour, grace: time.Hour}
	// (A validation still running at the grace having taken fewer than steps is the schema's own
	// cost and disables the definition: 12 validations at once under -race on a loaded machine
	// took fewer than 1,000 steps in 220 ms, so a slow tree must show its 100 within 620 ms.)
	slow := validationLimits{steps: 100, stepsPerNode: 1 << 30, wall: 20 * time.Millisecond, grace: 600 * time.Millisecond}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// (t.Errorf: not on the test's goroutine)
			switch i % 3 {
			case 0:
				if e := validateArgumentsWithin(tl, []byte(tree(8)), budget); e == nil || e.Code != subjects.CodeInvalidArguments || !strings.Contains(e.Message, "more than 5000 steps") {
					t.Errorf("a deep tree: got %+v, want invalid_arguments", e)
				}
			case 1:
				if e := validateArgumentsWithin(tl, []byte(tree(9)), slow); e == nil || e.Code != subjects.CodeUnavailable {
					t.Errorf("a slow tree: got %+v, want unavailable", e)
				}
			default:
				if e := validateArgumentsWithin(tl, []byte(tree(1)), budget); e != nil {
					t.Errorf("a shallow tree: %+v", e)
				}
			}
		}()
	}
	wg.Wait()
	waitUntilTrue(t, "the copies given back", func() bool {
		tl.schema.mu.Lock()
		defer tl.schema.mu.Unlock()
		return len(tl.schema.idle) == maxIdleCopies || tl.schema.unusable.Load() != nil
	})
	if why := tl.schema.unusable.Load(); why != nil {
		t.Fatalf("the definition was made unusable: %s", *why)
	}
	if e := validateWithin(t, tl, tree(1), budget); e != nil {
		t.Fatalf("next call: %+v", e)
	}
}

// The step budget is exact: the same schema is refused past the budget whatever the machine's
// speed (the wall-clock backstop is set out of reach), and is fine below it.
func TestSchemaGuardStepBudget(t *testing.T) {
	lim := validationLimits{steps: 5000, stepsPerNode: 0, wall: time.Hour}

	// Shallow nesting stays within the budget: the schema works.
	ok := &tool{Public: "evil__t", InputSchema: []byte(explodingSchema)}
	if e := validateWithin(t, ok, nestedArgs(8), lim); e != nil {
		t.Fatalf("depth 8: got %+v, want valid", e)
	}
	if e := validateWithin(t, ok, `{"x":[[1]]}`, lim); e == nil || e.Code != subjects.CodeInvalidArguments || e.Path != "/x/0/0" {
		t.Fatalf("depth 2 with a number: got %+v, want invalid_arguments at /x/0/0", e)
	}

	tl := &tool{Public: "evil__t", InputSchema: []byte(explodingSchema)}
	got := validateWithin(t, tl, nestedArgs(40), lim)
	wantCode(t, got, subjects.CodeInvalidArguments, "more than 5000 steps")
	if tl.schema.unusable.Load() != nil {
		t.Fatal("the definition is remembered as unusable: one caller's arguments disabled it for every other")
	}
	if again := validateWithin(t, tl, nestedArgs(1), lim); again != nil {
		t.Fatalf("second call: got %+v, want valid", again)
	}
	// The copy that overran went back to the pool: nothing is left running.
	tl.schema.mu.Lock()
	idle := len(tl.schema.idle)
	tl.schema.mu.Unlock()
	if idle != 1 {
		t.Errorf("%d idle copies, want 1", idle)
	}

	// A schema exploding with its size alone (each $def refers twice to the next), on {}.
	var defs []string
	for i := 0; i < 40; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d40":{"type":"object"}`)
	chain := &tool{Public: "evil__chain", InputSchema: []byte(`{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`)}
	wantCode(t, validateWithin(t, chain, `{}`, lim), subjects.CodeInvalidArguments, "more than 5000 steps")
}

// What the step meter cannot see (failing evaluations inside "not" are not metered by the
// library) is stopped by the wall-clock backstop: 2^40 failing evaluations cannot finish in
// 100 ms on any machine, so the outcome does not depend on the machine's speed.
func TestSchemaGuardWallClockBackstop(t *testing.T) {
	var defs []string
	for i := 0; i < 40; i++ {
		defs = append(defs, fmt.Sprintf(`"a%d":{"anyOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"a40":false`)
	tl := &tool{Public: "evil__not", InputSchema: []byte(`{"not":{"$ref":"#/$defs/a0"},"$defs":{` + strings.Join(defs, ",") + `}}`)}
	lim := validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: 100 * time.Millisecond, grace: 100 * time.Millisecond}
	// The decode budget the arguments were let in under stays taken while the abandoned
	// validation still references them, up to the grace (it may never end: see metered).
	budget := newByteBudget(4 * decodeUnit)
	release, err := budget.acquire(t.Context(), 4*decodeUnit)
	if err != nil {
		t.Fatal(err)
	}
	lim.hold = newDecodeHold(release)
	got := validateWithin(t, tl, `{}`, lim)
	lim.hold.end()
	wantCode(t, got, subjects.CodeUnavailable, "took longer than 100ms")
	if n := len(budget.units); n != 0 && tl.schema.unusable.Load() == nil {
		t.Fatalf("%d decode units given back while the abandoned validation still runs", n)
	}
	// Still running after the grace: the definition is unusable, later calls refused at once.
	waitUntilTrue(t, "the definition unusable", func() bool { return tl.schema.unusable.Load() != nil })
	waitUntilTrue(t, "the decode budget given back after the grace", func() bool { return len(budget.units) == cap(budget.units) })
	lim.hold = nil
	again := validateWithin(t, tl, `{}`, lim)
	wantCode(t, again, subjects.CodeInvalidSchema, "ran for more than 200ms")
}

// TestSchemaGuardBackstopSparesBusyDefinitions: a harmless definition whose validations overran
// the wall-clock backstop because the machine was busy stays usable (the backstop used to
// disable it for every later call: any caller could, with many large calls at once).
func TestSchemaGuardBackstopSparesBusyDefinitions(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]+$"}}}}}}`)}
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := range 20_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"a":"abcdefgh"}`)
	}
	b.WriteString(`]}`)
	// A backstop no validation of these arguments can meet, a grace any can.
	lim := validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: time.Nanosecond, grace: time.Minute}
	wantCode(t, validateWithin(t, tl, b.String(), lim), subjects.CodeUnavailable, "took longer than")
	waitUntilTrue(t, "the copy given back", func() bool {
		tl.schema.mu.Lock()
		defer tl.schema.mu.Unlock()
		return len(tl.schema.idle) > 0
	})
	if why := tl.schema.unusable.Load(); why != nil {
		t.Fatalf("harmless definition disabled: %s", *why)
	}
	if e := validateArguments(tl, []byte(`{"rows":[]}`)); e != nil {
		t.Fatalf("next call: %+v", e)
	}
}

// TestSchemaGuardAbandonedValidationHoldsBudget: a validation the wall-clock backstop cut off
// (the call was answered unavailable, nobody uses its outcome) runs on, its decoded arguments
// (~25× their JSON) referenced until it ends, but their share of the decode budget used to be
// given back at once: the budget no longer counted memory still in use, and more large values
// were decoded meanwhile. The share now goes back when the validation ends (here: a harmless
// one on a busy machine, which ends soon after).
func TestSchemaGuardAbandonedValidationHoldsBudget(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]+$"}}}}}}`)}
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := range 20_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"a":"abcdefgh"}`)
	}
	b.WriteString(`]}`)
	lim := validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: time.Nanosecond, grace: time.Minute}
	budget := newByteBudget(4 * decodeUnit)
	release, err := budget.acquire(t.Context(), 4*decodeUnit)
	if err != nil {
		t.Fatal(err)
	}
	lim.hold = newDecodeHold(release)
	wantCode(t, validateWithin(t, tl, b.String(), lim), subjects.CodeUnavailable, "took longer than")
	lim.hold.end()
	idle := func() bool {
		tl.schema.mu.Lock()
		defer tl.schema.mu.Unlock()
		return len(tl.schema.idle) > 0
	}
	// Never given back while the validation runs: the copy goes back to the pool first.
	for range 3000 { // bounded: 30 s
		units, done := len(budget.units), idle()
		if units != 0 && !done {
			t.Fatalf("%d decode units given back while the abandoned validation still runs", units)
		}
		if units == cap(budget.units) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(budget.units); n != cap(budget.units) {
		t.Fatalf("%d of %d decode units given back after the validation ended", n, cap(budget.units))
	}
}

func TestDecodeHold(t *testing.T) {
	n := 0
	h := newDecodeHold(func() { n++ })
	h.end()
	h.end()
	if n != 1 {
		t.Fatalf("released %d times, want 1", n)
	}
	n = 0
	h = newDecodeHold(func() { n++ })
	back := h.keep()
	h.end()
	if n != 0 {
		t.Fatal("released by its owner after an abandoned validation kept it")
	}
	back()
	back()
	if n != 1 {
		t.Fatalf("released %d times, want 1", n)
	}
	(*decodeHold)(nil).keep()() // no hold: nothing to keep
}

func waitUntilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 3000 { // bounded: 30 s
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not happen", what)
}

// Arguments nesting deeper than maxArgumentDepth are refused from their bytes; brackets inside
// strings do not count.
func TestSchemaGuardDepthCap(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(`{"type":"object"}`)}
	deep := func(levels int) string { // the arguments object is level 1
		return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
	}
	if e := validateArguments(tl, []byte(deep(maxArgumentDepth))); e != nil {
		t.Fatalf("%d levels: got %+v, want valid", maxArgumentDepth, e)
	}
	e := validateArguments(tl, []byte(deep(maxArgumentDepth+1)))
	wantCode(t, e, subjects.CodeInvalidArguments, fmt.Sprintf("more than %d levels", maxArgumentDepth))
	if e := validateArguments(tl, []byte(`{"s":"`+strings.Repeat(`[{\"`, 100)+`"}`)); e != nil {
		t.Fatalf("brackets in a string: got %+v, want valid", e)
	}
	// The hostile schema with too deep arguments: refused as arguments, the schema stays usable.
	evil := &tool{Public: "evil__t", InputSchema: []byte(explodingSchema)}
	wantCode(t, validateArguments(evil, []byte(nestedArgs(200))), subjects.CodeInvalidArguments, "levels deep")
	if evil.schema.unusable.Load() != nil {
		t.Fatal("too deep arguments made the schema unusable")
	}
}

// Legitimate work fits the default step budget with room to spare: a large array of objects
// against a oneOf of several variants (wall-clock backstop out of reach: steps decide).
func TestSchemaGuardLegitimateLoad(t *testing.T) {
	var variants []string
	for i := 0; i < 10; i++ {
		variants = append(variants, fmt.Sprintf(`{"allOf":[{"$ref":"#/$defs/base"}],"properties":{"kind":{"const":"k%d"},"v%d":{"type":"string"}},"required":["kind"]}`, i, i))
	}
	schema := `{"type":"object","properties":{"items":{"type":"array","items":{"oneOf":[` + strings.Join(variants, ",") +
		`]}}},"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}}}}}`
	var items []string
	for i := 0; i < 2000; i++ {
		items = append(items, fmt.Sprintf(`{"kind":"k%d","id":%d,"tags":["a","b"],"v%d":"x"}`, i%10, i, i%10))
	}
	tl := &tool{Public: "s__bulk", InputSchema: []byte(schema)}
	lim := defaultValidationLimits
	lim.wall = time.Hour
	args := `{"items":[` + strings.Join(items, ",") + `]}`
	if e := validateWithin(t, tl, args, lim); e != nil {
		t.Fatalf("got %+v, want valid", e)
	}
	m := tl.schema.idle[0]
	t.Logf("%d steps of %d allowed", m.steps, m.limit)
	if m.steps > m.limit/4 {
		t.Errorf("%d steps of %d allowed: too little room for legitimate work", m.steps, m.limit)
	}
}

// Concurrent validations of one definition each get a compiled copy of their own (run with
// -race), and get the right answers.
func TestSchemaGuardConcurrent(t *testing.T) {
	tl := &tool{Public: "s__t", InputSchema: []byte(`{"type":"object","properties":{"n":{"type":"integer","maximum":10}},"required":["n"]}`)}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if e := validateArguments(tl, []byte(`{"n":3}`)); e != nil {
					errs <- fmt.Sprintf("valid call refused: %+v", e)
					return
				}
				if e := validateArguments(tl, []byte(`{"n":30}`)); e == nil || e.Path != "/n" {
					errs <- fmt.Sprintf("invalid call: got %+v, want invalid_arguments at /n", e)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	tl.schema.mu.Lock()
	defer tl.schema.mu.Unlock()
	if n := len(tl.schema.idle); n < 1 || n > workers {
		t.Errorf("%d idle copies, want 1..%d", n, workers)
	}
}

// invalid_arguments messages say where and which rule failed, never the value that failed it:
// the message goes to the audit stream, past the redaction of the request's arguments.
func TestValidationMessageOmitsValues(t *testing.T) {
	cases := []struct {
		name, schema, args, secret, path, rule string
	}{
		{"pattern", `{"type":"object","properties":{"password":{"type":"string","pattern":"^[0-9]{6}$"}}}`,
			`{"password":"CorrectHorseBattery"}`, "CorrectHorseBattery", "/password", "^[0-9]{6}$"},
		{"pattern, key not sensitive", `{"properties":{"note":{"type":"string","pattern":"^[a-z]+$"}}}`,
			`{"note":"Hunter2-Secret"}`, "Hunter2-Secret", "/note", "pattern"},
		{"enum", `{"properties":{"mode":{"enum":["fast","safe"]}}}`,
			`{"mode":"Tr0ub4dor&3"}`, "Tr0ub4dor&3", "/mode", "'fast'"},
		{"enum of objects", `{"properties":{"auth":{"enum":[{"k":1}]}}}`,
			`{"auth":{"token":"s3cr3t-t0ken"}}`, "s3cr3t-t0ken", "/auth", "enum"},
		{"const", `{"properties":{"apiKey":{"const":"expected"}}}`,
			`{"apiKey":"sk-live-123456"}`, "sk-live-123456", "/apiKey", "expected"},
		{"format (draft-07 asserts it)", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"contact":{"type":"string","format":"email"}}}`,
			`{"contact":"PrivateNotAnEmail"}`, "PrivateNotAnEmail", "/contact", "email"},
		{"format ipv4", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"host":{"format":"ipv4"}}}`,
			`{"host":"10.1.2.345"}`, "10.1.2.345", "/host", "ipv4"},
		{"minimum", `{"properties":{"pin":{"type":"integer","minimum":100000}}}`,
			`{"pin":4711}`, "4711", "/pin", "100000"},
		{"maximum", `{"properties":{"pin":{"type":"integer","maximum":10}}}`,
			`{"pin":987654}`, "987654", "/pin", "10"},
		{"multipleOf", `{"properties":{"code":{"multipleOf":7}}}`,
			`{"code":31337}`, "31337", "/code", "7"},
		{"nested", `{"properties":{"creds":{"type":"array","items":{"properties":{"secret":{"pattern":"^x"}}}}}}`,
			`{"creds":[{"secret":"xok"},{"secret":"LeakMe"}]}`, "LeakMe", "/creds/1/secret", "^x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := &tool{Public: "vault__login", InputSchema: json.RawMessage(c.schema)}
			e := validateArguments(tl, []byte(c.args))
			if e == nil || e.Code != subjects.CodeInvalidArguments {
				t.Fatalf("got %+v, want invalid_arguments", e)
			}
			// The library prints numbers with digit grouping ("987,654"): look for the digits too.
			if strings.Contains(e.Message, c.secret) || strings.Contains(strings.ReplaceAll(e.Message, ",", ""), c.secret) {
				t.Errorf("the message quotes the value %q: %q", c.secret, e.Message)
			}
			if e.Path != c.path || !strings.Contains(e.Message, "'"+c.path+"'") {
				t.Errorf("got path %q, message %q: want the failing path %q in both", e.Path, e.Message, c.path)
			}
			if !strings.Contains(e.Message, c.rule) {
				t.Errorf("message %q does not say which rule failed (%q)", e.Message, c.rule)
			}
		})
	}
}

// The reviewer's reproduction through the executor: a refused call's audit events do not hold
// the password the arguments failed a pattern with.
func TestValidationMessageNotAudited(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	r.publishRegistry(subjects.RegistrySnapshot("vault", subjects.KindTools), subjects.Snapshot{V: 1, Type: subjects.EventSnapshot,
		Server: "vault", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(),
		Items: []json.RawMessage{json.RawMessage(`{"name":"login","inputSchema":{"type":"object","properties":{"password":{"type":"string","pattern":"^[0-9]{6}$"}}},"annotations":{"readOnlyHint":true}}`)}})
	r.waitTool("vault__login")
	res := r.call("local", "vault__login", `{"password":"CorrectHorseBattery"}`)
	if res.Error == nil || res.Error.Code != subjects.CodeInvalidArguments || res.Error.Path != "/password" {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "audit events", func() bool { evs = r.auditEvents("local", res.ID); return hasResultEvent(evs) })
	all, _ := json.Marshal(evs)
	if strings.Contains(string(all), "CorrectHorseBattery") {
		t.Errorf("audit events hold the password: %s", all)
	}
	if !strings.Contains(string(all), "/password") {
		t.Errorf("audit events do not say which argument failed: %s", all)
	}
}
