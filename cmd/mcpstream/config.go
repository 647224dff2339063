package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/mcpstream/mcpstream/printable"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// fileConfig is the YAML configuration file (`--config FILE`).
type fileConfig struct {
	Servers []serverEntry  `yaml:"servers"`
	Policy  *policy.Config `yaml:"policy"`
	Limits  *limitsConfig  `yaml:"limits"`
	Search  *searchConfig  `yaml:"search"`
	Streams *streamsConfig `yaml:"streams"`
	// EmbeddedNATS tunes the NATS server `up` embeds (see config_embedded.go).
	EmbeddedNATS *embeddedNATSConfig `yaml:"embeddedNats"`
	// Path is the file it was read from ("" for the bundled demo configuration).
	Path string `yaml:"-"`

	// resolved holds Servers with every ${ENV_VAR} reference resolved, in the same order.
	resolved []registrysync.ServerConfig
	// embedder is the search.embeddings endpoint (nil: lexical search only), embedTimeout its
	// request bound, embedSecrets its resolved key (redacted from audit events like every other
	// configured secret).
	embedder     *embeddings.Client
	embedTimeout time.Duration
	embedSecrets []string
	// streams holds the streams section's retention (zero: not given; see keepLimits).
	streams subjects.StreamOptions
	// embedded holds the embeddedNats section (zero: nats-server's defaults).
	embedded natsembed.Config
}

// serverEntry is one MCP server of the configuration file.
type serverEntry struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Transport   string            `yaml:"transport"` // stdio | http | sse
	Command     string            `yaml:"command"`
	Args        []string          `yaml:"args"`
	Env         map[string]string `yaml:"env"`     // values may be ${ENV_VAR} references
	Cwd         string            `yaml:"cwd"`     // stdio: working directory, relative to the config file's
	URL         string            `yaml:"url"`     // http, sse
	Headers     map[string]string `yaml:"headers"` // values may be ${ENV_VAR} references
	AuthContext string            `yaml:"authContext"`
	Protocol    string            `yaml:"protocolVersion"`
	CallTimeout string            `yaml:"callTimeout"` // Go duration, e.g. 30s
	Kinds       []string          `yaml:"kinds"`       // tools, prompts, resources; empty = all three
}

// ServerConfigs returns the servers with their ${ENV_VAR} references resolved, ready for
// registrysync. Their Secrets list every value that must never be logged or published.
func (c *fileConfig) ServerConfigs() []registrysync.ServerConfig {
	return slices.Clone(c.resolved)
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid configuration")

// maxConfigBytes bounds the configuration file read.
const maxConfigBytes = 4 << 20

// maxConfigErrors bounds the problems a configuration error lists.
const maxConfigErrors = 50

// configError is one precise configuration problem: file, line, where (section, server), field.
// It never holds a resolved secret value.
type configError struct {
	File  string
	Line  int    // 0 = unknown
	Where string // e.g. "servers[2] (github)", "policy"; "" = the document
	Field string // e.g. "url"; "" = the whole section
	Msg   string
	// problem is the policy problem it reports, which says where in the policy section it is
	// (see problemLine).
	problem *policy.Problem
}

func (e *configError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Where != "" {
		b.WriteString(e.Where + ": ")
	}
	if e.Field != "" {
		b.WriteString("field " + e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return printable.Escape(b.String())
}

func (e *configError) Unwrap() error { return ErrConfig }

// loadConfig reads and validates a configuration file. lookup resolves ${ENV_VAR} references
// (os.LookupEnv in the binary). Every problem found is reported, each on its own line, as
// "FILE[:LINE]: servers[2] (github): field url: ...".
func loadConfig(path string, lookup func(string) (string, bool)) (*fileConfig, error) {
	return loadConfigFor(path, lookup, true)
}

// loadConfigFor is loadConfig for a process whose roles may not need the servers' secrets:
// without serverSecrets (a process that runs neither registrysync nor the executor) a
// ${ENV_VAR} of a server that is not set is no error, and that server is left out of
// ServerConfigs. Secrets of the other sections (search.embeddings.apiKey) are resolved all the
// same.
func loadConfigFor(path string, lookup func(string) (string, bool), serverSecrets bool) (*fileConfig, error) {
	// Without waiting for a writer (a named pipe nobody writes to would block here for good): a
	// pipe that has one (--config <(...), --config /dev/stdin) is read to its end all the same.
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if st.IsDir() {
		return nil, &configError{File: path, Msg: "a directory, not a configuration file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %w", ErrConfig, err)
	}
	if len(data) > maxConfigBytes {
		return nil, &configError{File: path, Msg: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}
	}
	if len(data) == 0 && st.Mode()&os.ModeNamedPipe != 0 {
		return nil, &configError{File: path, Msg: "a named pipe with nothing written to it"}
	}
	return parseConfigFor(path, data, lookup, serverSecrets)
}

// parseConfig is loadConfig on bytes already read; path is only used in messages.
func parseConfig(path string, data []byte, lookup func(string) (string, bool)) (*fileConfig, error) {
	return parseConfigFor(path, data, lookup, true)
}

func parseConfigFor(path string, data []byte, lookup func(string) (string, bool), serverSecrets bool) (*fileConfig, error) {
	cerr := func(line int, where, field, msg string) error {
		return &configError{File: path, Line: line, Where: where, Field: field, Msg: msg}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, cerr(0, "", "", "empty configuration (want at least a servers: list)")
		}
		if line, col, b, ok := notUTF8(data); ok && yamlEncodingError(err) {
			// yaml says only "invalid leading UTF-8 octet", with no line. Any other error it
			// met first, before reading that far: it is the one reported.
			return nil, cerr(line, "", "", fmt.Sprintf("byte 0x%02x at column %d is not UTF-8: save the file as UTF-8", b, col))
		}
		return nil, yamlError(path, err, nil)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = extra.Line
		}
		return nil, cerr(line, "", "", "more than one YAML document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, cerr(root.Line, "", "", "the document must be a mapping with servers:, policy: and limits:")
	}

	// A policy: key with nothing under it (every rule commented out, say) would decode to no
	// policy, the open one: everything allowed. Refused, so it never fails open; so is an alias
	// of a null node ("policy: *none"), which decodes the same.
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		for n := 0; v.Kind == yaml.AliasNode && v.Alias != nil && n < 100; n++ {
			v = v.Alias
		}
		if k.Value == "policy" && v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return nil, cerr(k.Line, "policy", "", emptyPolicyMsg)
		}
	}

	// Unknown fields are errors, reported with their exact place.
	w := &shapeWalker{file: path, where: map[int]string{}}
	w.walk(root, reflect.TypeFor[fileConfig](), "")
	if len(w.errs) > 0 {
		return nil, limitErrors(path, w.errs)
	}
	cfg := &fileConfig{Path: path}
	if err := root.Decode(cfg); err != nil {
		return nil, limitErrors(path, unjoin(yamlError(path, err, w.where)))
	}
	if err := cfg.validate(lookup, serverSecrets); err != nil {
		errs := unjoin(err)
		for _, e := range errs {
			w.placeLine(e)
		}
		return nil, limitErrors(path, errs)
	}
	return cfg, nil
}

// yamlEncodingError reports whether err is yaml's reading of bytes that are not UTF-8
// ("invalid leading UTF-8 octet", "invalid Unicode character" for an encoded surrogate).
func yamlEncodingError(err error) bool {
	return strings.Contains(err.Error(), "UTF-8") || strings.Contains(err.Error(), "invalid Unicode character")
}

// notUTF8 finds the first byte of data that is not UTF-8: its line and column (both from 1; a
// UTF-8 byte order mark, which editors do not show, is no column). A file that starts with a
// UTF-16 byte order mark is UTF-16, which yaml reads.
func notUTF8(data []byte) (line, col int, b byte, ok bool) {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return 0, 0, 0, false
	}
	line, col = 1, 1
	i := 0
	if bytes.HasPrefix(data, []byte{0xef, 0xbb, 0xbf}) {
		i = 3
	}
	for i < len(data) {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, col, data[i], true
		case r == '\n':
			line, col = line+1, 1
		default:
			col++
		}
		i += size
	}
	return 0, 0, 0, false
}

// unjoin returns the errors err joins, flattened (err alone when it joins none).
func unjoin(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoin(e)...)
	}
	return out
}

// limitErrors joins the first maxConfigErrors of errs, and says how many more there are.
func limitErrors(path string, errs []error) error {
	if len(errs) <= maxConfigErrors {
		return errors.Join(errs...)
	}
	more := &configError{File: path, Msg: fmt.Sprintf("and %d more problems", len(errs)-maxConfigErrors)}
	return errors.Join(append(errs[:maxConfigErrors:maxConfigErrors], more)...)
}

var yamlLineRe = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError turns a yaml error into configErrors with the line and, where known, the place.
func yamlError(path string, err error, where map[int]string) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var errs []error
	for _, m := range msgs {
		ce := &configError{File: path, Msg: m}
		if g := yamlLineRe.FindStringSubmatch(m); g != nil {
			ce.Line, _ = strconv.Atoi(g[1])
			ce.Msg = g[2]
			ce.Where = where[ce.Line]
		}
		ce.Msg = cutTagMismatch(strings.TrimPrefix(ce.Msg, "yaml: "))
		errs = append(errs, ce)
	}
	return errors.Join(errs...)
}

// yamlTagMismatchRe matches yaml's error for a value its explicit tag does not fit
// ("cannot decode !!str `sk-...` as a !!int"), which quotes the value whole.
var yamlTagMismatchRe = regexp.MustCompile("(?s)^(cannot decode \\S+ `)(.*)(` as a \\S+)$")

// cutTagMismatch cuts the value msg quotes, when it is yaml's error for a value its explicit tag
// does not fit, as yaml's type errors cut theirs (to 7 bytes and "..."): the value may be a
// header's or env's secret, or as long as the file.
func cutTagMismatch(msg string) string {
	g := yamlTagMismatchRe.FindStringSubmatch(msg)
	if g == nil || len(g[2]) <= 10 {
		return msg
	}
	cut := 7
	for cut > 0 && !utf8.RuneStart(g[2][cut]) {
		cut--
	}
	return g[1] + g[2][:cut] + "..." + g[3]
}

// widensPolicy explains why key, of a mapping decoded into t, may not have the value v ("" when
// it may): null or an empty list decode as if the key were left out, which for these keys widens
// the policy, so that commenting out every entry (or a merge ("<<:") bringing one so) fails
// open: a policy: key with nothing under it is the open policy, a rule's tenants, users or roles
// left empty match anyone, and principals left empty let any user act with the roles its
// requests claim.
func widensPolicy(t reflect.Type, key string, v *yaml.Node) string {
	for n := 0; v.Kind == yaml.AliasNode && v.Alias != nil && n < 100; n++ {
		v = v.Alias
	}
	null := v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null"
	empty := null || v.Kind == yaml.SequenceNode && len(v.Content) == 0 || v.Kind == yaml.MappingNode && emptyMapping(v, map[*yaml.Node]bool{})
	switch {
	case t == reflect.TypeFor[fileConfig]() && key == "policy" && null:
		return emptyPolicyMsg
	case t == reflect.TypeFor[policy.Config]() && key == "principals" && empty:
		return "empty, which would let any user act with the roles its requests claim: remove the key for that, or list the users"
	case t == reflect.TypeFor[policy.Rule]() && (key == "tenants" || key == "users" || key == "roles") && empty:
		return `empty, which would match anyone: remove the key, or write ["*"] for anyone`
	}
	return ""
}

// emptyMapping reports whether mapping n decodes to no entry: it holds nothing but merges
// ("<<") of mappings that hold nothing ({<<: {}}, {<<: [{}, *empty]}). seen holds the mappings
// looked at so far, and whether they are empty: each is looked at once, however many aliases
// repeat it. One that merges itself (&a {<<: *a}, which yaml refuses) is not empty: it was
// followed until the stack overflowed.
func emptyMapping(n *yaml.Node, seen map[*yaml.Node]bool) (empty bool) {
	if empty, ok := seen[n]; ok {
		return empty
	}
	seen[n] = false
	defer func() { seen[n] = empty }()
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !isMergeKey(n.Content[i]) {
			return false
		}
		v := n.Content[i+1]
		for j := 0; v.Kind == yaml.AliasNode && v.Alias != nil && j < 100; j++ {
			v = v.Alias
		}
		items := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			items = v.Content
		}
		for _, item := range items {
			for j := 0; item.Kind == yaml.AliasNode && item.Alias != nil && j < 100; j++ {
				item = item.Alias
			}
			// Anything else than a mapping is no merge yaml decodes: refused as such.
			if item.Kind != yaml.MappingNode || !emptyMapping(item, seen) {
				return false
			}
		}
	}
	return true
}

// emptyPolicyMsg refuses a policy: key with nothing under it.
const emptyPolicyMsg = "empty, which would allow everything: remove the key for the open policy " +
	"(one local principal may use every tool), or give principals and rules (policy: {rules: []} denies everything)"

// fieldIf is field when ok, else "".
func fieldIf(ok bool, field string) string {
	if ok {
		return field
	}
	return ""
}

// shapeWalker checks a YAML tree against the Go types it decodes into: every mapping key must be
// a field (yaml KnownFields, but with the place of each unknown key in the message).
type shapeWalker struct {
	file  string
	errs  []error
	where map[int]string // line → place, for decode errors
	// lines maps a place and field, as lineKey writes them, to the line of its key (or of its
	// value for a list item): for the errors of validate, which has only the decoded values.
	lines map[string]lineAt
	// merging counts the merges (<<) being walked: a key they bring in yields to the mapping's
	// own key, which decodes over it, whatever their order.
	merging int
	steps   int // nodes walked
	// walked holds the nodes checked, with the type they were checked against: an alias
	// repeats its node, which is checked once (n aliases of a node of n items are n² items).
	walked map[walkedNode]bool
}

type walkedNode struct {
	n *yaml.Node
	t reflect.Type
}

func (w *shapeWalker) walk(n *yaml.Node, t reflect.Type, where string) {
	// Where it is written: an alias's own line, not its anchor's (which is walked once).
	w.setLine(where, "", n.Line)
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if w.walked == nil {
		w.walked = map[walkedNode]bool{}
	}
	if w.walked[walkedNode{n, t}] {
		return
	}
	w.walked[walkedNode{n, t}] = true
	w.steps++
	if _, ok := w.where[n.Line]; !ok && where != "" {
		w.where[n.Line] = where
	}
	if n.Kind == yaml.MappingNode && !w.uniqueKeys(n, t, where) {
		return
	}
	if msg := typeProblem(n, t); msg != "" {
		// Reported here, with its own field: decode errors only give a line, and the fields
		// of a flow mapping share one.
		w.errs = append(w.errs, &configError{File: w.file, Line: n.Line, Where: parentOf(where), Field: fieldOf(where), Msg: msg})
		return
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMergeKey(k) {
				w.walkMerge(v, t, where)
				continue
			}
			name := keyName(k)
			ft, ok := fields[name]
			if !ok {
				names := make([]string, 0, len(fields))
				for name := range fields {
					names = append(names, name)
				}
				sort.Strings(names)
				w.errs = append(w.errs, &configError{File: w.file, Line: k.Line, Where: where, Field: name,
					Msg: "unknown field (known: " + strings.Join(names, ", ") + ")"})
				continue
			}
			w.where[k.Line] = join(where, "field "+name)
			w.setLine(where, name, k.Line)
			if msg := widensPolicy(t, name, v); msg != "" {
				w.errs = append(w.errs, &configError{File: w.file, Line: k.Line, Where: cmp.Or(where, name), Field: fieldIf(where != "", name), Msg: msg})
				continue
			}
			if w.null(k, v, ft, cmp.Or(where, name), fieldIf(where != "", name)) {
				continue
			}
			w.walk(v, ft, join(where, name))
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if isMergeKey(k) {
				w.walkMerge(n.Content[i+1], t, where)
				continue
			}
			if text, null := nullKey(k); null {
				// yaml.v3 decodes it to no string, and leaves the entry out without a word:
				// principals: {null: ...} would be no principals at all.
				w.errs = append(w.errs, &configError{File: w.file, Line: k.Line, Where: parentOf(where), Field: fieldOf(where) + "." + text,
					Msg: fmt.Sprintf("a null key, which yaml leaves out: quote it (%q) for that name", text)})
				continue
			}
			w.setLine(parentOf(where), fieldOf(where)+"."+keyName(k), k.Line)
			// A key of a map is part of the field's name: env.API_KEY.
			if w.null(k, n.Content[i+1], t.Elem(), parentOf(where), fieldOf(where)+"."+keyName(k)) {
				continue
			}
			w.walk(n.Content[i+1], t.Elem(), join(where, keyName(k)))
		}
		chunkMapping(n)
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			at := fmt.Sprintf("%s[%d]%s", where, i, nameOf(item))
			if w.null(nil, item, t.Elem(), parentOf(at), fieldOf(at)) {
				continue
			}
			w.walk(item, t.Elem(), at)
		}
	case isInt(t) && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float":
		// yaml truncates a float into an integer (concurrency: 0.5 would be 0, no limit).
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil && f != math.Trunc(f) {
			w.errs = append(w.errs, &configError{File: w.file, Line: n.Line, Where: parentOf(where), Field: fieldOf(where),
				Msg: fmt.Sprintf("%s is not a whole number", n.Value)})
		}
	}
}

// null reports whether v, the value of key k (nil: an item of a list, or of a merge when field is
// "<<") at where and field, decoded into t, is null (nothing after the key, ~, null, or an alias
// of one), and reports that as a problem.
// yaml decodes a null value to the zero value without a word, and leaves a null item out: a
// limits.servers entry left null (its fields commented out, say) would be no limit, lifting the
// "*" one for that server; a null item of args would move the later ones up; a null env or header
// value would be "". An explicit null is most likely a mistake, so it is refused everywhere:
// remove the key for the default, or write the empty value ({}, [], "") for that.
func (w *shapeWalker) null(k, v *yaml.Node, t reflect.Type, where, field string) bool {
	for n := 0; v.Kind == yaml.AliasNode && v.Alias != nil && n < 100; n++ {
		v = v.Alias
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!null" {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	line := v.Line
	if k != nil {
		line = k.Line
	}
	var msg string
	switch {
	case k == nil && field == "<<":
		msg = "a merge (<<) of a null: merge a mapping, or a list of mappings"
	case k == nil && t.Kind() == reflect.String && v.Value != "":
		msg = fmt.Sprintf("a null item, which yaml leaves out: remove it, or quote it (%q) for that text", v.Value)
	case k == nil:
		msg = "a null item, which yaml leaves out: remove it"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		msg = "null (nothing, ~ or null), which yaml reads as an empty mapping: give its entries, write {} for none, or remove the key"
	case t.Kind() == reflect.Slice:
		msg = "null (nothing, ~ or null), which yaml reads as an empty list: give its items, write [] for none, or remove the key"
	case t.Kind() == reflect.String && v.Value != "":
		msg = fmt.Sprintf(`null, which yaml reads as "": quote it (%q) for that text, write "" for an empty value, or remove the key`, v.Value)
	case t.Kind() == reflect.String:
		msg = `null (nothing after the key), which yaml reads as "": give a value, write "" for an empty one, or remove the key`
	default:
		msg = "null (nothing, ~ or null): give a value, or remove the key"
	}
	w.errs = append(w.errs, &configError{File: w.file, Line: line, Where: where, Field: field, Msg: msg})
	return true
}

// lineKey is the key of lines for a place and field as configErrors give them
// ("servers[2] (github)", "env.API_KEY"), without the names of list items, which validate may
// spell otherwise ("servers[2]" when the name comes from a merge).
func lineKey(where, field string) string {
	if !strings.Contains(where, "] (") && !strings.Contains(field, "] (") {
		return where + "\x00" + field
	}
	return dropItemNames(where) + "\x00" + dropItemNames(field)
}

// dropItemNames removes the names of list items from a place: "[2] (NAME)" becomes "[2]" (the
// name ends at the first ")"). By hand, not with a regexp: it runs for every node walked.
func dropItemNames(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "] (")
		if i < 0 {
			break
		}
		end := strings.IndexByte(s[i+3:], ')')
		if end < 0 || !itemIndexBefore(s[:i]) {
			b.WriteString(s[:i+3])
			s = s[i+3:]
			continue
		}
		b.WriteString(s[:i+1])
		s = s[i+3+end+1:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s)
	return b.String()
}

// itemIndexBefore reports whether s ends with "[" and digits: a list item's index.
func itemIndexBefore(s string) bool {
	digits := len(s) - len(strings.TrimRight(s, "0123456789"))
	return digits > 0 && strings.HasSuffix(s[:len(s)-digits], "[")
}

// lineAt is a line of lines, and whether a merge (<<) brought its key in.
type lineAt struct {
	line   int
	merged bool
}

// setLine records the line of a place and field, unless it has one (an alias or merge that
// repeats it is not where it is written), or one a merge brought in and this is a mapping's own
// key (which decodes over the merged one).
func (w *shapeWalker) setLine(where, field string, line int) {
	if w.lines == nil {
		w.lines = map[string]lineAt{}
	}
	k := lineKey(where, field)
	if old, ok := w.lines[k]; !ok || old.merged && w.merging == 0 {
		w.lines[k] = lineAt{line, w.merging > 0}
	}
}

// placeLine gives err, a configError of validate without a line, the line of its field, else of
// its place (a server refused as a whole; a policy problem's entry, see problemLine, else the
// policy: key).
func (w *shapeWalker) placeLine(err error) {
	ce, ok := err.(*configError)
	if !ok || ce.Line != 0 || ce.Where == "" {
		return
	}
	if ce.problem != nil {
		ce.Line = w.problemLine(ce.problem)
	}
	if ce.Line == 0 && ce.Where == "policy" && ce.Field == "" {
		ce.Line = w.lines[lineKey("", "policy")].line
	}
	if ce.Line == 0 && ce.Field != "" {
		ce.Line = w.lines[lineKey(ce.Where, ce.Field)].line
	}
	if ce.Line == 0 {
		ce.Line = w.lines[lineKey(ce.Where, "")].line
	}
}

// problemLine is the line of the entry policy problem p is about: the item of a rule's or
// principal's list (allow[1], roles[0]), else the key of its field, else the rule (its item of
// rules) or the principal (its key); 0 when none is known. The places are built as walk builds
// them; a rule's with the name nameOf shows, or without one (a name a merge brought in, which
// nameOf does not see).
func (w *shapeWalker) problemLine(p *policy.Problem) int {
	line := func(where, field string) int { return w.lines[lineKey(where, field)].line }
	var places []string
	if p.Rule > 0 {
		at := fmt.Sprintf("policy.rules[%d]", p.Rule-1)
		places = []string{at + shownName(p.RuleName), at}
	} else {
		places = []string{join("policy.principals", p.Principal)}
	}
	// The most precise line any place has first: lineKey drops the names of list items, so
	// the field of a named place can be found where its items are not.
	var keys [][2]string
	if p.Field != "" && p.Item > 0 {
		for _, at := range places {
			keys = append(keys, [2]string{fmt.Sprintf("%s[%d]", join(at, p.Field), p.Item-1), ""})
		}
	}
	if p.Field != "" {
		for _, at := range places {
			keys = append(keys, [2]string{at, p.Field})
		}
	}
	if p.Rule > 0 {
		for _, at := range places {
			keys = append(keys, [2]string{at, ""})
		}
	} else {
		keys = append(keys, [2]string{"policy", "principals." + p.Principal}) // the principal's key
	}
	for _, k := range keys {
		if l := line(k[0], k[1]); l > 0 {
			return l
		}
	}
	return 0
}

// walkMerge walks the value of a merge key ("<<") in a mapping decoded into t: it brings in the
// keys of a mapping, or of a list of mappings, which are keys of t too.
func (w *shapeWalker) walkMerge(v *yaml.Node, t reflect.Type, where string) {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	w.merging++
	defer func() { w.merging-- }()
	for _, item := range items {
		if w.null(nil, item, t, where, "<<") {
			continue // yaml refuses it too, but without a line
		}
		w.walk(item, t, where)
	}
}

// keyNamed returns the name key k decodes to as a string, a map's key or a struct's field name
// (an alias as the key it repeats, !!binary decoded), and whether it decodes to one (not a
// null, mapping or list).
func keyNamed(k *yaml.Node) (string, bool) {
	for i := 0; k.Kind == yaml.AliasNode && k.Alias != nil && i < 100; i++ {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return "", false
	}
	switch k.ShortTag() {
	case "!!null":
		return "", false
	case "!!binary":
		b, err := base64.StdEncoding.DecodeString(k.Value)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return k.Value, true
}

// nullKey reports whether key k is null (null, ~, nothing, or an alias of one), and its text.
func nullKey(k *yaml.Node) (string, bool) {
	for i := 0; k.Kind == yaml.AliasNode && k.Alias != nil && i < 100; i++ {
		k = k.Alias
	}
	return k.Value, k.Kind == yaml.ScalarNode && k.ShortTag() == "!!null"
}

// keyName is the name key k decodes to (keyNamed), or its text.
func keyName(k *yaml.Node) string {
	if name, ok := keyNamed(k); ok {
		return name
	}
	return k.Value
}

// isMergeKey reports whether k is a merge key ("<<"), as yaml decodes it.
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// uniqueKeys reports whether the keys of mapping n, at where and decoded into t, all differ,
// and reports each one defined again. yaml.v3 compares every key with every other, and reports
// every pair of equal keys: k copies of one key gave k²/2 problems, so decoding is left to it
// only once its keys are known to differ.
func (w *shapeWalker) uniqueKeys(n *yaml.Node, t reflect.Type, where string) bool {
	// Keys are compared as the names they decode to (a string map's keys, a struct's fields):
	// an alias of an earlier key (*k) or a !!binary one repeats it too, which yaml.v3, comparing
	// the nodes' kind and text, lets by (the last one kept, or the first once chunkMapping has
	// made the mapping a merge). Keys that decode to no name keep yaml.v3's comparison.
	type key struct {
		kind  yaml.Kind
		value string
		named bool
	}
	first := make(map[key]int, len(n.Content)/2)
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		name, named := keyNamed(k)
		id := key{yaml.ScalarNode, name, true}
		if !named {
			name = k.Value
			id = key{k.Kind, k.Value, false}
		}
		line, dup := first[id]
		if !dup {
			first[id] = k.Line
			continue
		}
		ok = false
		e := &configError{File: w.file, Line: k.Line, Where: where, Field: name,
			Msg: fmt.Sprintf("mapping key %q already defined at line %d", name, line)}
		if t.Kind() != reflect.Struct {
			// A key of a map is part of the field's name: env.API_KEY.
			e.Where, e.Field = parentOf(where), fieldOf(where)+"."+name
		}
		w.errs = append(w.errs, e)
	}
	return ok
}

// mapChunk bounds the keys of a mapping that yaml.v3 decodes at once (see chunkMapping).
const mapChunk = 128

// chunkMapping rewrites mapping n, whose keys all differ, of more than mapChunk keys as a merge
// ("<<") of mappings of at most mapChunk keys each, followed by what n merged itself: yaml.v3
// compares every key of a mapping with every other before decoding it, so an env, headers,
// principals or limits mapping of n keys took n² steps (minutes for the 4 MiB a file may hold).
// It decodes to the same map: the keys of a merge's earlier mappings win over later ones'.
//
// A mapping that merges is rewritten so whatever its size: yaml.v3 lets its own keys win over
// merged ones by comparing them decoded without a type, so an own key that is no string there
// (1001, true) lost to the merged "1001" (a principal kept the roles it was given to narrow);
// in a merged chunk it is compared as the map's key, and wins. A mapping with a key named "<<"
// (quoted: no merge) is left as it is: yaml.v3 counts a merge key among the mapping's own keys,
// which would win over the name.
func chunkMapping(n *yaml.Node) {
	own, merges := 0, false
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; {
		case isMergeKey(k):
			merges = true
		case keyName(k) == "<<":
			return
		default:
			own++
		}
	}
	if own <= mapChunk && (!merges || own == 0) {
		return
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column}
	var merged []*yaml.Node
	var chunk *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			if v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
			continue
		}
		if chunk == nil || len(chunk.Content) >= 2*mapChunk {
			chunk = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: k.Line, Column: k.Column}
			seq.Content = append(seq.Content, chunk)
		}
		chunk.Content = append(chunk.Content, k, v)
	}
	seq.Content = append(seq.Content, merged...)
	n.Content = []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!merge", Value: "<<", Line: n.Line, Column: n.Column}, seq}
}

// typeProblem returns why node n does not decode into type t (t is no pointer), or "". Only n
// itself is checked: what it holds is walked in its turn.
func typeProblem(n *yaml.Node, t reflect.Type) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return "" // the zero value
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if n.Kind == yaml.MappingNode {
			return ""
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			return ""
		}
	case reflect.String:
		if n.Kind == yaml.ScalarNode {
			return "" // any scalar is a string
		}
	}
	if n.Kind == yaml.MappingNode {
		// Without decoding it, which compares every key with every other first.
		return shapeMsg(t, "a mapping")
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return ""
	}
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if g := yamlLineRe.FindStringSubmatch(msg); g != nil {
		msg = g[2]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if g := yamlUnmarshalRe.FindStringSubmatch(msg); g != nil {
		switch {
		case outOfRange(n, t):
			return fmt.Sprintf("want %s, got %s: out of range", shapeOf(t), g[2])
		case n.Kind == yaml.SequenceNode:
			return shapeMsg(t, "a list") // (of a local tag, yaml quotes its empty value)
		case g[2] != "":
			return shapeMsg(t, g[2]) // the value as yaml shows it, cut to 10 bytes
		}
	}
	return msg
}

// outOfRange reports whether scalar n is a number too large for the number type t
// (burst: 99999999999999999999, perSecond: 1e400), which yaml refuses as of the wrong type.
// A quoted or tagged value ("5", !!str 5, !foo 5) is no number, refused as such whatever it
// reads as, and so are the words nan and inf, which strconv reads but YAML writes .nan and .inf.
func outOfRange(n *yaml.Node, t reflect.Type) bool {
	if n.Kind != yaml.ScalarNode || !isInt(t) && t.Kind() != reflect.Float32 && t.Kind() != reflect.Float64 {
		return false
	}
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 ||
		n.Style&yaml.TaggedStyle != 0 && n.ShortTag() != "!!int" && n.ShortTag() != "!!float" {
		return false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	return errors.Is(err, strconv.ErrRange) || err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// yamlUnmarshalRe matches yaml's type errors: "cannot unmarshal !!str `maybe` into bool", of a
// local tag too ("!foo `x`").
var yamlUnmarshalRe = regexp.MustCompile("^cannot unmarshal (\\S+)(?: (`.*`))? into ")

// shapeMsg says what a field of type t wants and what it got, in the words of a YAML file:
// yaml's own message names Go types ("into []main.serverEntry"), which mean nothing to whoever
// wrote the file.
func shapeMsg(t reflect.Type, got string) string {
	return "want " + shapeOf(t) + ", got " + got
}

// shapeOf names what a value of type t is written as in YAML.
func shapeOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "a mapping"
	case t.Kind() == reflect.Slice:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch e.Kind() {
		case reflect.String:
			return "a list of strings"
		case reflect.Struct, reflect.Map:
			return "a list of mappings"
		}
		return "a list"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case isInt(t):
		return "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	}
	return t.Kind().String()
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// parentOf and fieldOf split a place built by join ("limits.tenant.burst") into the place of
// the mapping and the field ("limits.tenant", "burst").
func parentOf(where string) string {
	if i := strings.LastIndexAny(where, ".:"); i >= 0 {
		return strings.TrimSpace(where[:i])
	}
	return ""
}

func fieldOf(where string) string {
	if i := strings.LastIndexAny(where, ".:"); i >= 0 {
		return strings.TrimSpace(where[i+1:])
	}
	return where
}

// join builds a place such as "servers[2] (github): headers".
func join(where, next string) string {
	switch {
	case where == "":
		return next
	case strings.HasSuffix(where, ")") || strings.HasPrefix(next, "field "):
		return where + ": " + next
	}
	return where + "." + next
}

// nameOf returns " (NAME)" for a mapping item that has a scalar name: key, NAME cut to
// maxNameShown bytes: it is part of the place of every node under the item, built and scanned
// (lineKey) for each, so a name of megabytes made walking quadratic (a name that long is
// refused, with its place in full, by validate).
func nameOf(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			return shownName(n.Content[i+1].Value)
		}
	}
	return ""
}

// shownName is " (NAME)" for a list item named name, NAME cut to maxNameShown bytes; "" for no
// name.
func shownName(name string) string {
	if name == "" {
		return ""
	}
	if len(name) > maxNameShown {
		cut := maxNameShown
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "..."
	}
	return " (" + name + ")"
}

// maxNameShown bounds the name of a list item shown in its place: the longest valid server name.
const maxNameShown = 64

// yamlFields maps the yaml keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

var (
	envRefName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	protocolRe  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	secretNames = regexp.MustCompile(`(?i)authorization|cookie|token|secret|password|passwd|api[-_]?key|credential`)
)

// validate checks every server, resolves ${ENV_VAR} references and compiles the policy.
// Without serverSecrets, a server whose references are not all set is checked for everything
// else and left out of resolved.
func (c *fileConfig) validate(lookup func(string) (string, bool), serverSecrets bool) error {
	var errs []error
	seen := map[string]int{}
	c.resolved = make([]registrysync.ServerConfig, 0, len(c.Servers))
	for i := range c.Servers {
		sc, unset, err := c.Servers[i].resolve(c.Path, i, seen, lookup, !serverSecrets)
		if err == nil && unset {
			continue
		}
		if err == nil {
			// As the connectors will check it, with ${ENV} references resolved (a command
			// that expands to nothing, say).
			if verr := registrysync.Validate(sc); verr != nil {
				err = &configError{File: c.Path, Where: fmt.Sprintf("servers[%d] (%s)", i, sc.Name),
					Msg: strings.TrimPrefix(verr.Error(), registrysync.ErrInvalidConfig.Error()+": ")}
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.resolved = append(c.resolved, sc)
	}
	if _, err := c.Limits.executorLimits(); err != nil {
		// Each on its own, of its own key (one message holding them all showed its line breaks
		// escaped, \x0a).
		for _, e := range unjoin(err) {
			ce := &configError{File: c.Path, Where: "limits", Msg: e.Error()}
			if le, ok := e.(*limitError); ok {
				ce.Field, ce.Msg = le.field, le.msg
			}
			errs = append(errs, ce)
		}
	}
	if _, err := policy.New(c.Policy); err != nil {
		errs = append(errs, policyErrors(c.Path, err)...)
	}
	if err := c.resolveSearch(lookup); err != nil {
		errs = append(errs, err)
	}
	if err := c.resolveStreams(); err != nil {
		errs = append(errs, err)
	}
	if err := c.resolveEmbeddedNATS(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// policyErrors are the problems policy.New found in the policy section, each a configError
// of its own, to be given the line of its entry (see problemLine), and how many more there are.
func policyErrors(file string, err error) []error {
	var pe *policy.Error
	if !errors.As(err, &pe) {
		return []error{&configError{File: file, Where: "policy", Msg: strings.TrimPrefix(err.Error(), policy.ErrInvalid.Error()+": ")}}
	}
	errs := make([]error, 0, len(pe.Problems)+1)
	for _, p := range pe.Problems {
		errs = append(errs, &configError{File: file, Where: "policy", Msg: p.Msg, problem: p})
	}
	if pe.More > 0 {
		errs = append(errs, &configError{File: file, Where: "policy", Msg: fmt.Sprintf("and %d more problems", pe.More)})
	}
	return errs
}

// resolve validates one server entry and resolves its references. With allowUnset, a
// reference to a variable that is not set is no error: unset then reports it (and the
// ServerConfig is incomplete).
func (s *serverEntry) resolve(file string, i int, seen map[string]int, lookup func(string) (string, bool), allowUnset bool) (_ registrysync.ServerConfig, unset bool, _ error) {
	where := fmt.Sprintf("servers[%d]", i)
	if s.Name != "" {
		where += " (" + s.Name + ")"
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &configError{File: file, Where: where, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case s.Name == "":
		bad("name", "required")
	case len(s.Name) > 64:
		bad("name", "longer than 64 bytes")
	case strings.IndexFunc(s.Name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		bad("name", "must not hold spaces or control characters")
	case strings.Contains(s.Name, "__"):
		bad("name", `must not hold "__": it separates the server from the tool in public names and policy patterns`)
	case strings.ContainsAny(s.Name, `*?[\`):
		// A deny written as the name reads would match other names, or none: "prod[eu]__*"
		// matches the servers "prode" and "produ", "a*__*" every server starting with "a".
		bad("name", `must not hold *, ?, [ or \: policy patterns and limits match server names as globs`)
	default:
		if j, dup := seen[s.Name]; dup {
			bad("name", "duplicate: servers[%d] has the same name", j)
		} else {
			seen[s.Name] = i
		}
	}
	transport := s.Transport
	if transport == "" {
		switch {
		case s.Command != "" && s.URL == "":
			transport = registrysync.TransportStdio
		case s.URL != "" && s.Command == "":
			transport = registrysync.TransportHTTP
		}
	}
	stdio := transport == registrysync.TransportStdio
	switch transport {
	case registrysync.TransportStdio:
		if s.Command == "" {
			bad("command", "required for transport stdio")
		}
		if s.URL != "" {
			bad("url", "only for transports http and sse")
		}
		if len(s.Headers) > 0 {
			bad("headers", "only for transports http and sse")
		}
	case registrysync.TransportHTTP, registrysync.TransportSSE:
		if s.URL == "" {
			bad("url", "required for transport %s", transport)
		}
		if s.Command != "" {
			bad("command", "only for transport stdio")
		}
		if len(s.Args) > 0 {
			bad("args", "only for transport stdio")
		}
		if len(s.Env) > 0 {
			bad("env", "only for transport stdio")
		}
		if s.Cwd != "" {
			bad("cwd", "only for transport stdio")
		}
	case "":
		bad("transport", "required: stdio (with command) or http or sse (with url)")
	default:
		bad("transport", "%q is not one of stdio, http, sse", s.Transport)
	}
	var callTimeout time.Duration
	if s.CallTimeout != "" {
		d, err := time.ParseDuration(s.CallTimeout)
		switch {
		case err != nil:
			bad("callTimeout", "%q is not a duration such as 30s or 2m", s.CallTimeout)
		case d <= 0:
			bad("callTimeout", "must be positive")
		}
		callTimeout = d
	}
	switch {
	case s.Protocol == "":
	case !protocolRe.MatchString(s.Protocol):
		bad("protocolVersion", "%q is not an MCP protocol version such as 2025-11-25", s.Protocol)
	case !slices.Contains(mcp.ValidProtocolVersions, s.Protocol):
		bad("protocolVersion", "%q is not an MCP protocol version mcpstream speaks: %s", s.Protocol, strings.Join(mcp.ValidProtocolVersions, ", "))
	}
	if s.AuthContext != "" && !validAuthContext(s.AuthContext) {
		bad("authContext", "%q is not tenant:T, user:U or tenant:T/user:U", s.AuthContext)
	}
	for _, k := range s.Kinds {
		if !subjects.Kind(k).Valid() {
			bad("kinds", "%q is not one of tools, prompts, resources", k)
		}
	}

	// References: resolved values are secrets, and never appear in an error.
	var secrets []string
	expand := func(field, v string) string {
		out, refs, err := expandEnv(v, lookup)
		var notSet *envNotSetError
		if allowUnset && errors.As(err, &notSet) {
			unset = true
			return ""
		}
		if err != nil {
			bad(field, "%v", err)
			return ""
		}
		secrets = append(secrets, refs...)
		if stdio && strings.IndexByte(out, 0) >= 0 {
			// A process cannot be given one: it would fail to start, again and again.
			bad(field, "holds a NUL byte")
		}
		return out
	}
	sc := registrysync.ServerConfig{
		Name:            s.Name,
		Description:     s.Description,
		Transport:       transport,
		AuthContext:     s.AuthContext,
		ProtocolVersion: s.Protocol,
		Kinds:           slices.Clone(s.Kinds),
		CallTimeout:     callTimeout,
	}
	// No shell starts the child: nothing expands a "~" ("~/bin/server" would be taken as
	// relative to cwd, a cwd "~/mcp" as relative to the config file's directory).
	if msg := tildeProblem(s.Command); msg != "" {
		bad("command", "%s", msg)
	}
	if msg := tildeProblem(s.Cwd); msg != "" {
		bad("cwd", "%s", msg)
	}
	sc.Command = expand("command", s.Command)
	for j, a := range s.Args {
		sc.Args = append(sc.Args, expand(fmt.Sprintf("args[%d]", j), a))
	}
	if s.Cwd != "" && stdio {
		// As the MCP SDKs' cwd: the directory the child starts in, where a relative command
		// ("./server.py") and relative args are found. A relative one is taken from the config
		// file's directory, not from wherever mcpstream happened to be started.
		dir := expand("cwd", s.Cwd)
		if dir != "" && !filepath.IsAbs(dir) && file != "" {
			if base, ok := configDir(file); ok {
				dir = filepath.Join(base, dir)
				if abs, err := filepath.Abs(dir); err == nil {
					dir = abs
				}
			} else {
				bad("cwd", "relative, and the configuration was read from %s, not from a file in a directory it could be taken from: give an absolute directory (${PWD}/%s for one under mcpstream's own)", file, s.Cwd)
			}
		}
		sc.Dir = dir
	}
	if len(s.Env) > 0 {
		sc.Env = map[string]string{}
		for _, k := range sortedKeys(s.Env) {
			if !envRefName.MatchString(k) {
				bad("env", "%q is not an environment variable name", k)
			}
			sc.Env[k] = expand("env."+k, s.Env[k])
			if secretNames.MatchString(k) && sc.Env[k] != "" {
				secrets = append(secrets, sc.Env[k])
			}
		}
	}
	if s.URL != "" {
		sc.URL = expand("url", s.URL)
		if sc.URL != "" && !stdio {
			if u, err := url.Parse(sc.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				bad("url", "not an absolute http:// or https:// URL")
			} else if !embeddings.ValidPort(u.Port()) {
				// url.Parse takes any digits: every connection would fail to dial, retried without end.
				bad("url", "the port must be from 1 to 65535")
			} else if u.User != nil {
				if p, ok := u.User.Password(); ok && p != "" {
					secrets = append(secrets, p)
				}
			}
		}
	}
	if len(s.Headers) > 0 {
		sc.Headers = map[string]string{}
		canonical := map[string]string{}
		for _, k := range sortedKeys(s.Headers) {
			if !headerName(k) {
				bad("headers", "%q is not a header name", k)
			} else if why, ok := droppedHeaders[http.CanonicalHeaderKey(k)]; ok {
				bad("headers."+k, "never sent: %s", why)
			} else if first, dup := canonical[http.CanonicalHeaderKey(k)]; dup {
				// Each request would send one or the other, in map order.
				bad("headers."+k, "the same header as %s (header names do not depend on case): keep one", first)
			} else {
				canonical[http.CanonicalHeaderKey(k)] = k
			}
			sc.Headers[k] = expand("headers."+k, s.Headers[k])
			if strings.ContainsAny(sc.Headers[k], "\r\n") {
				bad("headers."+k, "value holds a line break")
			} else if strings.IndexFunc(sc.Headers[k], func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) >= 0 {
				// net/http refuses to send it: every request of the connector would fail.
				bad("headers."+k, "value holds a control character")
			}
			if secretNames.MatchString(k) && sc.Headers[k] != "" {
				secrets = append(secrets, sc.Headers[k])
				if _, cred, ok := strings.Cut(sc.Headers[k], " "); ok && cred != "" {
					secrets = append(secrets, cred) // "Bearer TOKEN": TOKEN alone too
				}
			}
		}
	}
	if len(errs) > 0 {
		return registrysync.ServerConfig{}, false, errors.Join(errs...)
	}
	if unset {
		return registrysync.ServerConfig{}, true, nil
	}
	// Whatever the connector redacts (credential-looking env and header names, URL passwords
	// and query parameters): the executor's audit redaction gets the same values.
	sc.Secrets = dedupSecrets(append(secrets, registrysync.SecretValues(sc)...))
	return sc, false, nil
}

// configDir is the directory a relative cwd is taken from: the configuration file's. A
// configuration read from a pipe or the standard input (--config <(envsubst < tmpl.yaml),
// --config /dev/stdin) has none: /dev/fd or /proc/self/fd is no directory of the user's (ok false).
func configDir(file string) (dir string, ok bool) {
	dir = filepath.Dir(file)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	// (/dev/shm and other directories under /dev or /proc may hold files of one's own.)
	d := filepath.ToSlash(dir)
	if d == "/dev" || d == "/dev/fd" || strings.HasPrefix(d, "/proc/") && strings.HasSuffix(d, "/fd") {
		return "", false
	}
	return dir, true
}

// tildeProblem says why v, a path a shell would expand the leading "~" of ("~", "~/x",
// "~user/x"), is refused, and what to write instead; "" for any other value.
func tildeProblem(v string) string {
	if !strings.HasPrefix(v, "~") || v != "~" && !strings.Contains(v, "/") {
		return ""
	}
	const msg = "a ~ is not expanded (no shell starts the server): "
	if rest := v[1:]; rest == "" || rest[0] == '/' {
		return msg + "write ${HOME}" + rest
	}
	return msg + "write the absolute path, or ${HOME}/... for your own"
}

// droppedHeaders are the headers Go's HTTP client writes itself and never sends from a request's
// header map: configured, they would be dropped without a word (each with why, and what to do).
var droppedHeaders = map[string]string{
	"Host":              "the HTTP client sends the url's host as Host: put that host in url",
	"Content-Length":    "the HTTP client sets it for each request",
	"Transfer-Encoding": "the HTTP client sets it for each request",
	"Trailer":           "the HTTP client sets it for each request",
}

// headerName reports whether k is an HTTP field name (an RFC 9110 token), as net/http requires.
func headerName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// envNotSetError is a ${NAME} reference to a variable that is not set.
type envNotSetError struct{ name string }

func (e *envNotSetError) Error() string { return "environment variable " + e.name + " is not set" }

// expandEnv resolves ${NAME} references in v; "$$" is a literal "$". It returns the resolved
// values (the secrets) too. An error never holds a resolved value.
func expandEnv(v string, lookup func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(v, "$") {
		return v, nil, nil
	}
	var b strings.Builder
	var refs []string
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '$' || i+1 >= len(v) {
			b.WriteByte(c)
			continue
		}
		switch v[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(v[i+2:], '}')
			if end < 0 {
				return "", nil, errors.New("unterminated ${ reference")
			}
			name := v[i+2 : i+2+end]
			if !envRefName.MatchString(name) {
				return "", nil, fmt.Errorf("${%s} is not a valid reference (want ${ENV_VAR})", name)
			}
			val, ok := lookup(name)
			if !ok {
				return "", nil, &envNotSetError{name: name}
			}
			if val != "" {
				refs = append(refs, val)
			}
			b.WriteString(val)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), refs, nil
}

func validAuthContext(s string) bool {
	parts := strings.Split(s, "/")
	if len(parts) > 2 {
		return false
	}
	for i, p := range parts {
		k, v, ok := strings.Cut(p, ":")
		if !ok || v == "" || (k != "tenant" && k != "user") || (len(parts) == 2 && k != []string{"tenant", "user"}[i]) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dedupSecrets removes duplicates and values too short to redact (redact.MinLen: they would
// shred ordinary text; the connector drops the same), longest first so that redaction replaces
// whole values before their parts.
func dedupSecrets(s []string) []string {
	out := s[:0]
	seen := map[string]bool{}
	for _, v := range s {
		if len(v) < redact.MinLen || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// Descriptions of the bundled demo servers, as the demo configuration states them.
var demoDescriptions = map[string]string{
	"logging":   "Application logs: query recent log entries by level and time",
	"ticketing": "Issue tracker: create and list tickets",
	"kb":        "Company knowledge base: policies, handbooks and FAQs",
}

// demoConfig is the configuration `up` uses without --config: the bundled demo servers, each a
// stdio child `<this binary> demo-server NAME --control <data>/demo/NAME.control.json`. Edit that
// JSON file ({"hide":[...],"add":[...]}) while up runs to change the server's tools.
func demoConfig(dataDir string, names []string) (*fileConfig, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo configuration: find this binary: %w", err)
	}
	dir := filepath.Join(dataDir, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	cfg := &fileConfig{}
	for _, name := range names {
		e := serverEntry{
			Name:        name,
			Description: demoDescriptions[name],
			Transport:   registrysync.TransportStdio,
			Command:     exe,
			Args:        []string{"demo-server", name, "--control", demoControlFile(dataDir, name)},
		}
		cfg.Servers = append(cfg.Servers, e)
		cfg.resolved = append(cfg.resolved, registrysync.ServerConfig{
			Name: e.Name, Description: e.Description, Transport: e.Transport, Command: e.Command, Args: e.Args,
		})
	}
	return cfg, nil
}

// demoControlFile is the control file of a demo server under `up`'s data directory.
func demoControlFile(dataDir, name string) string {
	return filepath.Join(dataDir, "demo", name+".control.json")
}
