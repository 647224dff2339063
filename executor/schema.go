package executor

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

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

// maxMessageIssues bounds how many validation issues one invalid_arguments message lists.
const maxMessageIssues = 5

// compiledSchema is a tool's compiled inputSchema, built once per tool definition.
type compiledSchema struct {
	once sync.Once
	sch  *jsonschema.Schema
	err  error
}

// schemaOf compiles t's raw inputSchema once per definition (a new snapshot makes new tools).
func schemaOf(t *tool) (*jsonschema.Schema, error) {
	c := &t.schema
	c.once.Do(func() { c.sch, c.err = compileSchema(t.InputSchema) })
	return c.sch, c.err
}

// noLoader refuses every URL that is not a meta-schema (those are built in).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) { return nil, fmt.Errorf("%w: %s", ErrRemoteRef, url) }

// compileSchema compiles a raw schema as is: $schema picks the draft (default 2020-12); $ref,
// $defs, oneOf, anyOf and the rest keep their meaning. A missing schema means any object.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	return sch, nil
}

// validateArguments checks args (raw JSON, nil = {}) against t's input schema. It returns nil
// or the refusal: invalid_arguments with the JSON pointer of the first failure in Path, or
// invalid_schema when the server's schema does not compile.
func validateArguments(t *tool, args []byte) *subjects.Error {
	sch, err := schemaOf(t)
	if err != nil {
		return &subjects.Error{Code: subjects.CodeInvalidSchema,
			Message: "the server's inputSchema of " + t.Public + " cannot be used: " + firstLine(err.Error())}
	}
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: "arguments must be a JSON object", Path: ""}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: "arguments are not valid JSON: " + err.Error()}
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &subjects.Error{Code: subjects.CodeInvalidArguments, Message: err.Error()}
	}
	return &subjects.Error{Code: subjects.CodeInvalidArguments, Path: failurePath(ve), Message: failureMessage(ve)}
}

// failurePath is the JSON pointer of the first failure: the first cause, followed through
// references; a missing required or a forbidden additional property is pointed at itself.
func failurePath(ve *jsonschema.ValidationError) string {
	e := ve
	for len(e.Causes) > 0 {
		switch e.ErrorKind.(type) {
		case *kind.Schema, *kind.Reference, *kind.Group:
			e = e.Causes[0]
			continue
		}
		break
	}
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
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

// failureMessage lists the failures, at most maxMessageIssues: "at '/title': got object, want
// string; at ”: missing property 'body'".
func failureMessage(ve *jsonschema.ValidationError) string {
	out := ve.BasicOutput()
	var parts []string
	more := 0
	for _, u := range out.Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		if strings.HasSuffix(msg, "validation failed") && strings.Contains(u.KeywordLocation, "$ref") {
			continue
		}
		if len(parts) == maxMessageIssues {
			more++
			continue
		}
		parts = append(parts, fmt.Sprintf("at '%s': %s", u.InstanceLocation, msg))
	}
	if len(parts) == 0 {
		return firstLine(ve.Error())
	}
	s := strings.Join(parts, "; ")
	if more > 0 {
		s += fmt.Sprintf(" (and %d more)", more)
	}
	return s
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
	return truncateString(s, 300)
}
