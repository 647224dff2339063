package executor

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcpstream/mcpstream/printable"
	"math/big"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/mcpstream/mcpstream/subjects"
)

// Errors of schema handling.
var (
	// ErrInvalidSchema is returned when a tool's inputSchema does not compile.
	ErrInvalidSchema = errors.New("invalid input schema")
	// ErrRemoteRef is returned for a $ref to anything but the schema itself or a JSON Schema
	// meta-schema: the executor never loads files or URLs named by a server.
	ErrRemoteRef = errors.New("external $ref not allowed")
)

// schemaURL is the base URL tool schemas are compiled under ($id inside a schema may change it).
const schemaURL = "https://mcpstream.invalid/tool/inputSchema.json"

// meterVocabURL names the executor's own vocabulary: it has no keyword, it only puts the step
// meter on every schema object (see meteredSchema).
const meterVocabURL = "https://mcpstream.invalid/vocab/meter"

// maxMessageIssues bounds how many validation issues one invalid_arguments message lists.
const maxMessageIssues = 5

// maxArgumentDepth bounds how deeply arguments nest (the arguments object is level 1): deeper
// arguments are refused, from their raw bytes, before anything else looks at them.
const maxArgumentDepth = 64

// maxSchemaDepth and maxSchemaObjects bound a server's inputSchema before it is compiled:
// how deeply its JSON nests (the schema object is level 1) and how many JSON objects it holds.
const (
	maxSchemaDepth   = 128
	maxSchemaObjects = 10_000
)

// Guarding validation against a hostile inputSchema.
//
// The inputSchema comes from an MCP server, which the executor does not trust, and the
// validator (santhosh-tekuri/jsonschema/v6) neither memoizes nor bounds its work: a schema whose
// $refs reach the same instance location along several paths makes it re-evaluate that location
// once per path, so the work can grow exponentially with the nesting of the arguments (a 110
// byte call against a 100 byte schema: hours) or with the schema alone (a chain of $defs each
// referring twice to the next). The library has no context, no step limit and no abort; the
// guard is built from what it offers:
//
//  1. maxArgumentDepth, checked on the raw bytes: no legitimate tool call nests 64 levels, and
//     it bounds the recursion of everything after it.
//  2. A step budget, exact and independent of machine load: every schema object of a compiled
//     copy carries the executor's meter as an extension (a vocabulary with no keyword,
//     meteredSchema), which the library calls once per evaluation of that schema object. Past
//     limit.steps + limit.stepsPerNode per JSON value of the arguments the meter panics out of
//     the library (it holds no lock and no shared state while validating) and the call is
//     refused with invalid_arguments: only that call, since the arguments chose the work (a
//     recursive union multiplies it with each level they nest), and one caller must not disable
//     the tool for every other; each such call costs at most its budget. (A result that overran
//     makes the definition's outputSchema unusable: the server chose both.) The meter is per copy, so each validation runs on a copy of its own
//     (copies are compiled on demand, one per concurrent validation of the definition, and
//     reused).
//  3. A wall-clock backstop, for what the meter cannot see: the library calls extensions after
//     the keywords of a schema object, and skips them for an evaluation that fails while only
//     a yes/no answer is wanted (inside "not", "if", and the branches of "oneOf" after a match)
//     or that fails on an early keyword (type, const, enum, format). A runaway made only of such
//     failing evaluations (an exponential $defs chain of failing anyOf under a "not") takes no
//     step. Validation therefore runs in a goroutine of its own, the worker waits at most
//     limit.wall (+ limit.wallPerMiB per MiB of arguments), and on overrun the call is refused
//     unavailable (elapsed time also measures the machine's load: a harmless definition must
//     not be disabled by many large calls at once); the definition is remembered as unusable if
//     that validation still runs limit.grace later (it burns a processor until it ends). A
//     validation of arguments is cut (meteredSchema.cut) half the grace past the backstop: the
//     budget grows with the arguments' size, so a caller can buy minutes of steps with padding;
//     one that stops then having taken more than limit.steps refuses only its call.
//
// Besides, before any validation: compileSchema bounds the schema's size (schemaShape) and
// refuses a schema that is part of itself (refCycle), a pattern only the ECMAScript engine
// compiles has each of its matches cut off (compilePattern), and the cost of a uniqueItems
// check, which takes a single step, is counted as the library starts it (hookUniqueItems), or
// for every array of the arguments first (costlyUniqueItems).
//
// Residual cost, stated plainly: Go cannot stop a goroutine from outside. A validation the
// meter stopped is over. One abandoned at the backstop runs on: if it ends within limit.grace
// nothing more happens; if not, the definition is unusable and the meter stops it at its next
// step; if it is inside such an unmetered failing subtree, its goroutine burns one CPU until
// that subtree ends, which for the worst schemas is never before the process exits. Calls of
// the definition made before it is found unusable (within limit.grace) can each add one; then
// it is one per definition, and a server that lists new definitions over and over can add one
// per definition. No worker is held past the backstop. An abandoned validation references its
// decoded value (~25× its JSON) until it ends; it keeps that value's share of the decode
// budget (decodebudget.go) until then, or until limit.grace, when the budget is given back
// though a runaway still holds the memory (holding it for ever would starve every large
// validation). Not chosen: stopping an abandoned validation at its next step, which would
// free the memory sooner: the backstop cannot tell a runaway from a busy machine, only the
// grace does, and a runaway stopped at once would never make its definition unusable (each
// call of it would cost a worker and a core for the whole backstop again).
//
// Not chosen: detecting such schemas when compiling them. Reaching a location along several
// paths is common and harmless ($defs shared by allOf branches); telling the exponential cases
// apart means re-deriving the library's evaluation order for every draft, and a miss is a hang.
type validationLimits struct {
	steps, stepsPerNode int           // evaluation budget: steps + stepsPerNode × JSON values of the arguments
	wall, wallPerMiB    time.Duration // wall-clock backstop: wall + wallPerMiB × MiB of arguments
	grace               time.Duration // after the backstop, how long before the definition is unusable
	// hold, when set, is the share of the decode budget (decodebudget.go) the validated value
	// was decoded under: a validation the backstop cut off keeps it until it ends (or grace).
	hold *decodeHold
}

// defaultValidationLimits: legitimate calls take a few evaluations per argument value (tens for
// a large oneOf) and a microsecond or two each; 4 MiB of arguments (MaxCallBytes) of a simple
// schema validate in about 2 s on one core.
var defaultValidationLimits = validationLimits{steps: 1 << 18, stepsPerNode: 256, wall: 3 * time.Second, wallPerMiB: 2 * time.Second, grace: time.Minute}

// compiledSchema is a tool's compiled inputSchema, built once per tool definition, with the
// compiled copies validation runs on (see meteredSchema).
type compiledSchema struct {
	once sync.Once
	err  error // the schema does not compile

	mu   sync.Mutex
	idle []*meteredSchema // compiled copies not validating now

	// unusable is why calls against this definition are refused from now on (validation
	// overran its budget once), nil while it is usable.
	unusable atomic.Pointer[string]

	// uniqueItems: some schema object of it asserts uniqueItems (set by check): the
	// arguments' arrays are costed first (see uniqueitems.go).
	uniqueItems bool
}

// meteredSchema is one compiled copy of a definition, used by one validation at a time. It is
// also the extension on every schema object of its copy: the library calls Validate once per
// evaluation of a schema object, which counts a step and stops the validation (panicking out
// of the library with a stopValidation) past the limit, or once the definition is unusable.
type meteredSchema struct {
	owner *compiledSchema
	sch   *jsonschema.Schema
	steps int // only the goroutine validating with the copy touches steps, limit and ecmaLeft
	limit int
	// ecmaLeft is what is left of the validation's ecmaMatchTimeout (see compilePattern).
	ecmaLeft time.Duration
	// regexLeft is what is left of the validation's maxFormatRegexTotal (see checkFormatRegex).
	regexLeft int
	// compiled: the copy is compiled; the regexp engine is called from then on only to check
	// strings of a value for "format": "regex" (checkFormatRegex).
	compiled bool
	// regexUnchecked is the first string of the validation that checkFormatRegex did not
	// parse, and why (zero if none): see validationOutcome.regexUnchecked.
	regexUnchecked regexNotChecked
	// uniqueLeft and hashLeft are what is left of the validation's budgets for uniqueItems
	// checks (costUniqueItems), when uniqueHooked: its schema objects with uniqueItems cost them.
	uniqueLeft, hashLeft int
	uniqueHooked         bool
	// cut stops the validation at its next step: set when a validation of arguments runs on
	// lim.grace past the backstop (see metered); reset by each validation.
	cut atomic.Bool
}

// stopValidation is the panic value with which the meter stops a validation, and an ECMAScript
// pattern whose match was cut off (see compilePattern).
type stopValidation struct {
	overBudget bool
	pattern    string // the pattern whose match was cut off
	uniqueAt   *any   // the first item of the array whose uniqueItems check was too costly
}

// Validate implements jsonschema.SchemaExt: one step.
func (m *meteredSchema) Validate(*jsonschema.ValidatorContext, any) {
	m.steps++
	if m.steps > m.limit {
		panic(stopValidation{overBudget: true})
	}
	if m.owner.unusable.Load() != nil || m.cut.Load() {
		panic(stopValidation{})
	}
}

// validationOutcome is the outcome of one metered validation.
type validationOutcome struct {
	err error
	// regexUnchecked: a string of the value was not checked as "format": "regex" (too
	// costly, see checkFormatRegex). Its failure could pass the validation as well as fail it
	// (under "not", an "if", a oneOf branch), so the outcome is not a judgement: the arguments
	// are refused, a result is passed on unchecked, whatever err says.
	regexUnchecked regexNotChecked
	stopped        *stopValidation
	panic          any // any other panic, with its stack, to panic again on the caller's goroutine
}

// run validates inst and sends the outcome: the goroutine of one validation.
func (m *meteredSchema) run(inst any, out chan<- validationOutcome) {
	var res validationOutcome
	defer func() {
		if p := recover(); p != nil {
			if s, ok := p.(stopValidation); ok {
				res.stopped = &s
			} else {
				res.panic = fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
		}
		out <- res
	}()
	res.err = m.sch.Validate(inst)
	// (taken off the copy: an idle copy does not keep a string of the value)
	res.regexUnchecked, m.regexUnchecked = m.regexUnchecked, regexNotChecked{}
}

// validators runs every validation on a goroutine of its own (see metered), one kept from an
// earlier validation when one is idle: a new goroutine's stack grew, copied, from 2 KiB to what
// the library's recursion needs, on every call (about half the cost of validating a small
// value). A goroutine stuck in a runaway validation is simply not idle; the next validation
// starts another.
var validators = validatorPool{jobs: make(chan func())}

type validatorPool struct{ jobs chan func() }

// validatorIdle is how long an idle validator goroutine waits for work before it ends.
const validatorIdle = 10 * time.Second

// run runs f on an idle validator goroutine, else on a new one.
func (p *validatorPool) run(f func()) {
	select {
	case p.jobs <- f:
	default:
		go p.serve(f)
	}
}

func (p *validatorPool) serve(f func()) {
	f()
	idle := time.NewTimer(validatorIdle)
	defer idle.Stop()
	for {
		select {
		case f := <-p.jobs:
			f()
			idle.Reset(validatorIdle)
		case <-idle.C:
			return
		}
	}
}

// check compiles the definition once (the first copy); the error says it does not compile.
func (c *compiledSchema) check(raw []byte) error {
	c.once.Do(func() {
		m, err := c.compileCopy(raw)
		if err == nil {
			err = checkMetaSchema(raw)
		}
		if err != nil {
			c.err = err
			return
		}
		c.uniqueItems = !m.uniqueHooked && mentionsUniqueItems(raw)
		c.release(m)
	})
	return c.err
}

func (c *compiledSchema) compileCopy(raw []byte) (*meteredSchema, error) {
	m := &meteredSchema{owner: c, ecmaLeft: ecmaMatchTimeout} // (each validation sets its own)
	sch, err := compileSchema(raw, m)
	if err != nil {
		return nil, err
	}
	m.sch = sch
	m.uniqueHooked = hookUniqueItems(sch, m)
	m.compiled = true
	return m, nil
}

// acquire takes an idle copy, or compiles one more.
func (c *compiledSchema) acquire(raw []byte) (*meteredSchema, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		m := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return m, nil
	}
	c.mu.Unlock()
	return c.compileCopy(raw)
}

// maxIdleCopies bounds the compiled copies a definition keeps between validations (a burst of
// concurrent calls compiles more; those beyond are dropped when given back).
const maxIdleCopies = 4

func (c *compiledSchema) release(m *meteredSchema) {
	c.mu.Lock()
	if len(c.idle) < maxIdleCopies {
		c.idle = append(c.idle, m)
	}
	c.mu.Unlock()
}

// refuse remembers the definition as unusable, and returns why (the first reason given).
func (c *compiledSchema) refuse(why string) string {
	c.unusable.CompareAndSwap(nil, &why)
	return *c.unusable.Load()
}

// meteredOutcome is the outcome of one validation run by metered.
type meteredOutcome struct {
	validationOutcome
	limit   int  // the step budget it ran under
	overran bool // the wall-clock backstop passed first: no outcome (it runs on, see metered)
}

// metered validates inst (size bytes of JSON) on a compiled copy of the definition (raw is its
// schema, compiled again if no copy is idle), within lim's step budget and wall-clock backstop
// (the wait, returned), in a goroutine of its own. A panic other than the meter's is raised
// again on the caller's goroutine (whose recoverer answers the call). A validation the backstop
// cut off runs on: if it ends within lim.grace its copy is given back (or, had a result's
// overrun the step budget, the definition's outputSchema is unusable); if not, the definition is unusable and the meter
// stops it at its next step. what names the value validated in the reasons ("arguments").
func (c *compiledSchema) metered(raw []byte, inst any, size int, lim validationLimits, what string) (meteredOutcome, time.Duration, error) {
	m, err := c.acquire(raw)
	if err != nil {
		return meteredOutcome{}, 0, err
	}
	values := countJSONValues(inst)
	m.steps, m.limit, m.ecmaLeft, m.regexLeft = 0, lim.steps+lim.stepsPerNode*values, ecmaMatchTimeout, maxFormatRegexTotal
	m.uniqueLeft, m.hashLeft = maxUniqueItemsCost, maxUniqueItemsCost+maxUniqueHashesPerValue*values
	m.regexUnchecked = regexNotChecked{}
	m.cut.Store(false)
	wall := lim.wall + time.Duration(int64(lim.wallPerMiB)*int64(size)>>20)
	out := make(chan validationOutcome, 1)
	validators.run(func() { m.run(inst, out) })
	timer := time.NewTimer(wall)
	defer timer.Stop()
	var res validationOutcome
	select {
	case res = <-out:
	case <-timer.C:
		// The definition is remembered unusable only if the validation is still running after
		// lim.grace more (a runaway the meter cannot see); the meter then stops it at its next
		// step. A late finish gives the copy back. Until then the validation references its
		// decoded value (~25× its JSON), so it keeps the share of the decode budget that value
		// was let in under (lim.hold); at the grace it gives it back all the same: a runaway
		// in a subtree the library does not meter may never end, and holding the share for
		// ever would starve every large validation of the process.
		hold := lim.hold.keep()
		go func() {
			defer hold()
			first := lim.grace
			if what == whatArguments {
				first = lim.grace / 2 // (then cut: see below)
			}
			grace := time.NewTimer(first)
			defer grace.Stop()
			select {
			case res := <-out:
				if res.stopped != nil && res.stopped.overBudget && what != whatArguments {
					c.refuse(overBudgetText(what, m.limit))
				} else if (res.stopped == nil || res.stopped.pattern != "" || res.stopped.overBudget || res.stopped.uniqueAt != nil) && res.panic == nil {
					c.release(m)
				}
			case <-grace.C:
				if what == whatArguments {
					// Arguments within the step budget may take longer than the backstop and its
					// grace (the budget grows with their size: ~3 µs a step of a recursive
					// union, 256 steps per JSON value, so 200 KB of padding buy a deep tree
					// minutes): their caller chose the work, so this validation is stopped, at
					// its next step, half the grace past the backstop, and only the call is
					// refused if it had taken more steps than any arguments are granted
					// (lim.steps). One that has not stopped at the grace, or had taken fewer
					// steps (the work the meter cannot see: the schema's), makes the
					// definition unusable.
					m.cut.Store(true)
					grace.Reset(lim.grace - first)
					select {
					case res := <-out:
						if res.panic != nil {
							return
						}
						if m.steps > lim.steps { // (read after the validation ended)
							c.release(m)
							return
						}
					case <-grace.C:
					}
				}
				c.refuse(fmt.Sprintf("validating %s against it ran for more than %v", what, wall+lim.grace))
			}
		}()
		return meteredOutcome{overran: true}, wall, nil
	}
	if res.panic != nil {
		panic(res.panic) // on the worker's goroutine, whose recoverer answers the call
	}
	limit := m.limit
	c.release(m)
	return meteredOutcome{validationOutcome: res, limit: limit}, wall, nil
}

// whatArguments names a call's arguments as metered's what: a validation of them that overran
// the step budget refuses that call only (the caller's arguments chose how much work their
// validation takes: a recursive union, say an expression tree whose every level tries each
// kind of node, multiplies it with each level they nest; one caller must not disable the tool
// for every other), where a result's makes the definition's outputSchema unusable (the server
// chose both).
const whatArguments = "arguments"

// overBudgetText is why a definition is unusable whose validation of what overran the step
// budget limit.
func overBudgetText(what string, limit int) string {
	return fmt.Sprintf("validating %s against it took more than %d steps (its $refs make the work explode)", what, limit)
}

// noLoader refuses every URL that is not a meta-schema (those are built in).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) { return nil, fmt.Errorf("%w: %s", ErrRemoteRef, url) }

// compileSchema compiles a raw schema as is: $schema picks the draft (default 2020-12); $ref,
// $defs, oneOf, anyOf and the rest keep their meaning. A missing schema means any object. A
// non-nil meter is put on every schema object as an extension (it adds no keyword).
func compileSchema(raw []byte, meter *meteredSchema) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte(`{"type":"object"}`)
	}
	if err := schemaShape(raw); err != nil {
		return nil, invalidSchema(err.Error(), err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalidSchema(firstLine(err.Error()), err)
	}
	if at, n, huge := hugeCount(doc); huge {
		return nil, invalidSchema(fmt.Sprintf("at %s: %s is more than the validator counts to (2^63-1)", singleQuoted(pointer(at)), truncateString(n, 40)), nil)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	patterns := newPatternCompiler(meter)
	c.UseRegexpEngine(func(pattern string) (jsonschema.Regexp, error) {
		if meter != nil && meter.compiled {
			// A string of the value validated, for "format": "regex": checked, no matcher
			// built (the library only asks whether it compiles).
			return nil, checkFormatRegex(pattern, meter)
		}
		return patterns.compile(pattern)
	})
	if meter != nil {
		c.RegisterVocabulary(&jsonschema.Vocabulary{URL: meterVocabURL,
			Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) { return meter, nil }})
		c.AssertVocabs() // else draft 2019+ schemas would enable it only through $vocabulary
	}
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, invalidSchema(compileErrorText(err), err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, invalidSchema(compileErrorText(err), err)
	}
	if loc, ok := refCycle(sch); ok {
		return nil, invalidSchema(refCycleText(loc), nil)
	}
	return sch, nil
}

// checkMetaSchema checks raw (which compiled with the meter) against the whole meta-schema of
// its draft, by compiling it as the library does without the meter's vocabulary. With a
// vocabulary registered and AssertVocabs, the library checks a 2019-09 or 2020-12 schema
// against the meta-schemas of the vocabularies in use only (core, applicator, unevaluated,
// validation), not the draft's own: nothing under "definitions" or "dependencies" (which that
// meta-schema still describes, and generators without $schema write), nor the meta-data, format
// and content keywords. A malformed subschema there would compile into something the library
// does not expect ("multipleOf": 0 divides by zero on every validation; "type": ["string", 5]
// reads as "string"). Once per definition (compiledSchema.check): the copies compile the
// same text. Faults only in the types of annotation keywords (onlyAnnotationFaults) are let
// through, as before.
func checkMetaSchema(raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return invalidSchema(firstLine(err.Error()), err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(newPatternCompiler(nil).compile)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return invalidSchema(compileErrorText(err), err)
	}
	if _, err := c.Compile(schemaURL); err != nil && !onlyAnnotationFaults(err) {
		return invalidSchema(compileErrorText(err), err)
	}
	return nil
}

// annotationMetaSchemas are the meta-schemas of the 2019-09 and 2020-12 vocabularies whose
// keywords only annotate for the executor: meta-data (title, description, default, examples,
// deprecated, readOnly, writeOnly), format (never asserted) and content (never asserted).
var annotationMetaSchemas = map[string]bool{
	"https://json-schema.org/draft/2020-12/meta/meta-data":         true,
	"https://json-schema.org/draft/2020-12/meta/format-annotation": true,
	"https://json-schema.org/draft/2020-12/meta/content":           true,
	"https://json-schema.org/draft/2019-09/meta/meta-data":         true,
	"https://json-schema.org/draft/2019-09/meta/format":            true,
	"https://json-schema.org/draft/2019-09/meta/content":           true,
}

// onlyAnnotationFaults reports whether err, a failure against the meta-schema, fails only
// rules of annotationMetaSchemas ("description": null, "examples" as an object): the library
// reads those keywords only when they have the right type, and ignores them otherwise, so the
// schema validates as if they were absent. Such schemas compiled before checkMetaSchema (with
// the meter, which leaves those vocabularies out), real servers send them (hand-written
// "description": None, examples keyed by name), and the TypeScript SDK accepts them (ajv with
// validateSchema false). A contentSchema is checked as a schema all the same.
func onlyAnnotationFaults(err error) bool {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return false
	}
	var only func(*jsonschema.ValidationError) bool
	only = func(v *jsonschema.ValidationError) bool {
		if len(v.Causes) == 0 {
			doc, _, _ := strings.Cut(v.SchemaURL, "#")
			return annotationMetaSchemas[doc]
		}
		if _, ok := v.ErrorKind.(*kind.AnyOf); ok {
			// (a branch failing only on annotations passes once they are ignored)
			return slices.ContainsFunc(v.Causes, only)
		}
		for _, c := range v.Causes {
			if !only(c) {
				return false
			}
		}
		return true
	}
	return only(ve)
}

// refCycleText says that the schema object at loc is part of itself.
func refCycleText(loc string) string {
	return "$ref cycle: " + singleQuoted(loc) + " is part of itself through $ref and applicators on the same value (allOf, anyOf, oneOf, not, if), so validating against it never ends"
}

// invalidSchemaError is a schema that does not compile: ErrInvalidSchema, what is wrong with
// it on one line, bounded, and the library's error if any.
type invalidSchemaError struct {
	text string
	err  error
}

func invalidSchema(text string, err error) error {
	return &invalidSchemaError{text: truncateString(text, maxSchemaErrorBytes), err: err}
}

func (e *invalidSchemaError) Error() string { return ErrInvalidSchema.Error() + ": " + e.text }
func (e *invalidSchemaError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrInvalidSchema}
	}
	return []error{ErrInvalidSchema, e.err}
}

// validateArguments checks args (raw JSON, nil = {}) against t's input schema. It returns nil
// or the refusal: invalid_arguments with the JSON pointer of the first failure in Path, or
// invalid_schema when the server's schema does not compile or validation against it overran
// its budget (then every later call of this definition is refused at once).
func validateArguments(t *tool, args []byte) *subjects.Error {
	return validateArgumentsWithin(t, args, defaultValidationLimits)
}

func validateArgumentsWithin(t *tool, args []byte, lim validationLimits) *subjects.Error {
	c := &t.schema
	if err := c.check(t.InputSchema); err != nil {
		return unusableSchema(t, firstLine(err.Error()))
	}
	if why := c.unusable.Load(); why != nil {
		return unusableSchema(t, *why)
	}
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: "arguments must be a JSON object", Path: ""}
	}
	if nestsDeeper(trimmed, maxArgumentDepth) {
		return &subjects.Error{Code: subjects.CodeInvalidArguments,
			Message: fmt.Sprintf("arguments nest more than %d levels deep", maxArgumentDepth)}
	}
	inst, err := decodeInstance(trimmed)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: fmt.Sprintf("arguments are not valid JSON (at byte %d)", se.Offset)}
		}
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: "arguments are not valid JSON"}
	}
	if at, dup := duplicateMember(trimmed); dup { // (valid JSON: it decoded)
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Path: at,
			Message: fmt.Sprintf("arguments name the member %s twice in one object (readers take different values of it); nothing was run", truncateString(printable.Escape(at), 200))}
	}

	if _, huge := firstHugeNumber(trimmed); huge {
		at, _ := hugeNumberAt(inst)
		p := pointer(at)
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Path: p,
			Message: fmt.Sprintf("%sa number of the arguments has %s; nothing was run", atLocation(truncateString(p, 200)), hugeNumberText)}
	}

	if c.uniqueItems {
		if at, costly := costlyUniqueItems(inst, maxUniqueItemsCost); costly {
			return costlyUniqueItemsError(at)
		}
	}

	res, wall, err := c.metered(t.InputSchema, inst, len(trimmed), lim, whatArguments)
	if err != nil { // it compiled once: it does again
		return unusableSchema(t, firstLine(err.Error()))
	}
	if res.overran {
		// Only this call is refused: elapsed time also measures the machine's load (many large
		// calls at once), which must not disable a harmless definition for everyone.
		return &subjects.Error{Code: subjects.CodeUnavailable,
			Message: fmt.Sprintf("validating the arguments took longer than %v (a busy executor, or a costly schema); nothing was run", wall)}
	}
	if res.stopped != nil {
		if res.stopped.pattern != "" {
			// Another value may match quickly: only this call is refused.
			return &subjects.Error{Code: subjects.CodeInvalidArguments,
				Message: fmt.Sprintf("the strings of the arguments took too long to match the inputSchema's pattern %s (matching is cut off after %v per call); nothing was run",
					singleQuoted(truncateString(res.stopped.pattern, 200)), ecmaMatchTimeout)}
		}
		if res.stopped.uniqueAt != nil {
			at, _ := arrayAt(inst, res.stopped.uniqueAt)
			return costlyUniqueItemsError(at)
		}
		if res.stopped.overBudget {
			// Only this call is refused (see whatArguments).
			return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: fmt.Sprintf(
				"validating the arguments against the inputSchema took more than %d steps (its $refs and unions make the work grow with how the arguments nest: send arguments that nest less); nothing was run", res.limit)}
		}
		return unusableSchema(t, *c.unusable.Load()) // another call found it unusable meanwhile
	}
	if nc := res.regexUnchecked; nc.why != "" {
		p := pointer(regexUncheckedAt(res.err, inst, nc.s))
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Path: p,
			Message: fmt.Sprintf("%sa string to check as a 'regex' %s; nothing was run", atLocation(truncateString(p, 200)), nc.why)}
	}
	if res.err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(res.err, &ve) {
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: "arguments do not match the inputSchema"}
	}
	issues := argumentIssues(ve)
	for _, is := range issues {
		// A cycle refCycle cannot see (a $dynamicRef resolved elsewhere than its static target)
		// that the library met: the schema's fault, not the arguments'.
		if k, ok := is.kind.(*kind.RefCycle); ok {
			return unusableSchema(t, c.refuse(refCycleText(relativeLocations(k.URL))))
		}
	}
	return &subjects.Error{Code: subjects.CodeInvalidArguments, Path: issuesPath(issues), Message: issuesMessage(issues)}
}

// costlyUniqueItemsError refuses arguments whose array at (JSON pointer tokens) would cost the
// inputSchema's uniqueItems check too much (see uniqueitems.go).
func costlyUniqueItemsError(at []string) *subjects.Error {
	p := pointer(at)
	return &subjects.Error{Code: subjects.CodeInvalidArguments, Path: p, Message: fmt.Sprintf(
		"%sthe items of an array would cost the inputSchema's uniqueItems check more than %d comparisons (distinct items the validator hashes alike: numbers differing in sign only, strings holding the byte 4, or items alike but for their end), or hashing more than %d plus %d per value of the arguments (arrays of more than 20 items nested in one another, numbers with large exponents); nothing was run",
		atLocation(truncateString(printable.Escape(p), 200)), maxUniqueItemsCost, maxUniqueItemsCost, maxUniqueHashesPerValue)}
}

// unusableSchema is the invalid_schema refusal of a call of t.
func unusableSchema(t *tool, why string) *subjects.Error {
	return &subjects.Error{Code: subjects.CodeInvalidSchema,
		Message: "the server's inputSchema of " + t.Public + " cannot be used: " + why}
}

// nestsDeeper reports whether the JSON text raw nests arrays and objects more than limit levels
// deep (text that is not JSON is refused later; any answer will do for it).
func nestsDeeper(raw []byte, limit int) bool { return jsonShape(raw, limit, 0) == tooDeep }

// countJSONValues is the number of JSON values in v (v itself and everything inside it).
func countJSONValues(v any) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += countJSONValues(e)
		}
	case []any:
		for _, e := range v {
			n += countJSONValues(e)
		}
	}
	return n
}

// issue is one failure of a validation: where in the validated value (a JSON pointer's
// tokens), and which rule.
type issue struct {
	at     []string
	kind   jsonschema.ErrorKind
	text   string
	causes []*jsonschema.ValidationError // what failed inside it, for collectIssues
}

// argumentIssues are the failures of the arguments, each with its text from issueText, in a
// fixed order (see collectIssues): a failure of a whole oneOf, anyOf, allOf or not comes first,
// then the failures of its branches.
func argumentIssues(ve *jsonschema.ValidationError) []issue {
	return collectIssues(ve, issueText, true)
}

// schemaIssues are the failures of a schema against its meta-schema (their locations are
// pointers into the schema), each with its text from schemaIssueText: the failures of single
// rules only (the meta-schema's own allOf and anyOf say nothing about where the schema is
// wrong).
func schemaIssues(ve *jsonschema.ValidationError) []issue {
	return collectIssues(ve, schemaIssueText, false)
}

// collectIssues walks the validation error tree depth-first, each level in one order: by
// location (numeric tokens in numeric order), then by keyword in the order the validator
// checks them (so a missing required property comes before a forbidden additional one),
// then by text. The validator's own order follows Go maps (properties, patternProperties,
// dependentSchemas). Failures that only pass others on (the whole schema, a group of failures
// of one schema object, a $ref) are replaced by those: the library's flat output loses the
// failure under a $ref (it reports the $ref's "validation failed" instead), which is why the
// tree is walked here. composites keeps the failures that have causes (a oneOf none of whose
// branches matched); without it only the failures of single rules are kept. Repeats (the
// same failure at the same location, reached along several paths) are dropped.
func collectIssues(ve *jsonschema.ValidationError, text func(jsonschema.ErrorKind) string, composites bool) []issue {
	var out []issue
	seen := map[string]bool{}
	var walk func(nodes []*jsonschema.ValidationError)
	walk = func(nodes []*jsonschema.ValidationError) {
		level := make([]issue, len(nodes))
		for i, n := range nodes {
			if k, ok := n.ErrorKind.(*kind.AdditionalProperties); ok {
				slices.Sort(k.Properties) // (in the order the validator met them in a Go map)
			}
			level[i] = issue{at: n.InstanceLocation, kind: n.ErrorKind, text: text(n.ErrorKind), causes: passOn(n.Causes)}
		}
		slices.SortStableFunc(level, func(a, b issue) int {
			if c := compareLocations(a.at, b.at); c != 0 {
				return c
			}
			if c := cmp.Compare(keywordRank(a.kind), keywordRank(b.kind)); c != 0 {
				return c
			}
			return strings.Compare(a.text, b.text)
		})
		for _, is := range level {
			if len(is.causes) == 0 || composites {
				if key := pointer(is.at) + "\x00" + is.text; !seen[key] {
					seen[key] = true
					out = append(out, is)
				}
			}
			walk(is.causes)
		}
	}
	walk(passOn([]*jsonschema.ValidationError{ve}))
	return out
}

// passOn replaces, in errs, the failures that only pass others on by those.
func passOn(errs []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	var out []*jsonschema.ValidationError
	for _, e := range errs {
		switch e.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference:
			if len(e.Causes) > 0 {
				out = append(out, passOn(e.Causes)...)
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// keywordRank is the place of a failure's keyword in the order the validator checks them.
func keywordRank(k jsonschema.ErrorKind) int {
	switch k.(type) {
	case *kind.FalseSchema, *kind.RefCycle, *kind.InvalidJsonValue:
		return 0
	case *kind.Type:
		return 1
	case *kind.Const:
		return 2
	case *kind.Enum:
		return 3
	case *kind.Format:
		return 4
	case *kind.MinProperties, *kind.MaxProperties:
		return 5
	case *kind.Required:
		return 6
	case *kind.Dependency:
		return 7
	case *kind.AdditionalProperties:
		return 8
	case *kind.PropertyNames:
		return 9
	case *kind.DependentRequired:
		return 10
	case *kind.MinItems, *kind.MaxItems, *kind.UniqueItems, *kind.AdditionalItems:
		return 11
	case *kind.Contains, *kind.MinContains, *kind.MaxContains:
		return 12
	case *kind.MinLength, *kind.MaxLength, *kind.Pattern:
		return 13
	case *kind.ContentEncoding, *kind.ContentMediaType, *kind.ContentSchema:
		return 14
	case *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum, *kind.ExclusiveMaximum, *kind.MultipleOf:
		return 15
	case *kind.Not:
		return 16
	case *kind.AllOf:
		return 17
	case *kind.AnyOf:
		return 18
	case *kind.OneOf:
		return 19
	}
	return 20
}

// compareLocations orders JSON pointer tokens: a parent before its children, array indices
// numerically.
func compareLocations(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		x, errx := strconv.ParseUint(a[i], 10, 64)
		y, erry := strconv.ParseUint(b[i], 10, 64)
		if errx == nil && erry == nil && x != y {
			return cmp.Compare(x, y)
		}
		return strings.Compare(a[i], b[i])
	}
	return cmp.Compare(len(a), len(b))
}

// issuesPath is the JSON pointer of the first issue; a missing required or a forbidden
// additional property is pointed at itself.
func issuesPath(issues []issue) string {
	if len(issues) == 0 {
		return ""
	}
	loc := issues[0].at
	switch k := issues[0].kind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			loc = append(loc[:len(loc):len(loc)], k.Missing[0])
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			loc = append(loc[:len(loc):len(loc)], k.Properties[0])
		}
	}
	return pointer(loc)
}

// issuesMessage lists the issues, at most maxMessageIssues: "at '/title': got object, want
// string; missing property 'body'" (a failure of the value itself has no location).
func issuesMessage(issues []issue) string {
	if len(issues) == 0 {
		return "does not match the inputSchema"
	}
	var parts []string
	for _, is := range issues[:min(len(issues), maxMessageIssues)] {
		// (the arguments' member names are the caller's: a name of megabytes, or one holding
		// control characters, is not echoed as it is; Error.Path keeps the exact pointer)
		parts = append(parts, atLocation(truncateString(printable.Escape(pointer(is.at)), maxIssueBytes))+truncateString(is.text, maxIssueBytes))
	}
	s := strings.Join(parts, "; ")
	if more := len(issues) - maxMessageIssues; more > 0 {
		s += fmt.Sprintf(" (and %d more)", more)
	}
	return s
}

// maxIssueBytes bounds the location and the text of one issue in an invalid_arguments message.
const maxIssueBytes = 256

// atLocation prefixes a failure at a JSON pointer inside the arguments: "at '/title': ", and
// nothing for the arguments object itself ("").
func atLocation(pointer string) string {
	if pointer == "" {
		return ""
	}
	return "at '" + pointer + "': "
}

// issueText says which rule failed, from the schema's side only: never the instance value, which
// may be a secret (a password that misses a pattern) and which the message would carry into the
// audit stream past its redaction. The caller knows what it sent; the path says where. Kinds
// whose text names only the schema, types, counts, indices or property names keep the
// library's text; the ones whose text quotes the value (pattern, format, the numeric bounds,
// content) are described here; a kind this code does not know gets its keyword only.
func issueText(ek jsonschema.ErrorKind) string {
	switch k := ek.(type) {
	case *kind.Pattern:
		return "does not match pattern " + singleQuoted(k.Want)
	case *kind.Format:
		var nc regexNotChecked
		if errors.As(k.Err, &nc) {
			return nc.why
		}
		return "is not a valid " + singleQuoted(k.Want)
	case *kind.Minimum:
		return "must be >= " + ratText(k.Want)
	case *kind.Maximum:
		return "must be <= " + ratText(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratText(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratText(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratText(k.Want)
	case *kind.ContentEncoding:
		return "is not " + singleQuoted(k.Want) + " encoded"
	case *kind.ContentMediaType:
		return "is not of media type " + singleQuoted(k.Want)
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.Not, *kind.AllOf, *kind.AnyOf, *kind.OneOf,
		*kind.FalseSchema, *kind.RefCycle, *kind.Type, *kind.Enum, *kind.Const, *kind.InvalidJsonValue,
		*kind.MinProperties, *kind.MaxProperties, *kind.MinItems, *kind.MaxItems, *kind.AdditionalItems,
		*kind.Required, *kind.Dependency, *kind.DependentRequired, *kind.AdditionalProperties,
		*kind.PropertyNames, *kind.UniqueItems, *kind.Contains, *kind.MinContains, *kind.MaxContains,
		*kind.MinLength, *kind.MaxLength, *kind.ContentSchema:
		// Enum and Const print the allowed values, not the one given.
		return k.LocalizedString(printer)
	}
	return singleQuoted(strings.Join(ek.KeywordPath(), "/")) + " failed"
}

func singleQuoted(s string) string { return "'" + s + "'" }

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return truncateString(s, maxSchemaErrorBytes)
}

// printer prints the library's failure texts, as its own Error methods do.
var printer = message.NewPrinter(language.English)
