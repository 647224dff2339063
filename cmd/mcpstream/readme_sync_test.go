package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The README is what a new user relies on; these tests keep the parts of it that name what the
// code defines (flags, metrics, error codes) in step with the code.

func readmeText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// helpCommands are every command and subcommand with flags of their own; `mcpstream help`
// must list no other command.
var helpCommands = [][]string{
	{"up"}, {"registrysync"}, {"indexer"}, {"executor"}, {"servers"}, {"servers", "remove"},
	{"events"}, {"demo-server"}, {"policy", "check"}, {"policy", "digest"}, {"search"},
	{"inspect"}, {"call"}, {"approve"}, {"deny"}, {"eval", "retrieval"},
}

// TestReadmeNamesEveryFlag: every flag of every command's --help is named in README (as
// --flag). approve and deny's --by and eval retrieval's --per-query and --embeddings-dimensions
// were not.
func TestReadmeNamesEveryFlag(t *testing.T) {
	readme := readmeText(t)
	out, errOut, err := catRun(t, "help")
	if err != nil {
		t.Fatalf("help: %v", err)
	}
	listed := map[string]bool{}
	for _, c := range helpCommands {
		listed[c[0]] = true
	}
	_, cmds, _ := strings.Cut(out+errOut, "Commands:\n")
	for line := range strings.Lines(cmds) {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		if name := strings.Fields(line)[0]; !listed[name] && name != "version" {
			t.Errorf("mcpstream help lists %s, which this test does not check: add it to helpCommands", name)
		}
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, c := range helpCommands {
		o, e, err := catRun(t, append(slices.Clone(c), "--help")...)
		if err != nil {
			t.Fatalf("%s --help: %v", strings.Join(c, " "), err)
		}
		flags := flagLine.FindAllStringSubmatch(o+e, -1)
		if len(flags) == 0 {
			t.Errorf("%s --help lists no flags", strings.Join(c, " "))
		}
		for _, f := range flags {
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(f[1]) + `\b`).MatchString(readme) {
				t.Errorf("%s --%s: not named in README.md", strings.Join(c, " "), f[1])
			}
		}
	}
}

// registeredMetrics are the metric names the package's files describe (desc("mcpstream_...", ...)).
func registeredMetrics(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, describedMetrics(f)...)
	}
	if len(names) < 20 {
		t.Fatalf("found %d metrics in the package: fewer than expected", len(names))
	}
	return names
}

// describedMetrics are the metric names f describes (desc("mcpstream_...", ...)).
func describedMetrics(f *ast.File) []string {
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "desc" {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				names = append(names, s)
			}
		}
		return true
	})
	return names
}

// readmeMetrics are the metric names of README's /metrics table: the first cell of each row,
// where `_suffix` stands for the first full name's mcpstream_<role> prefix with that suffix.
func readmeMetrics(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "**Metrics**")
	if !ok {
		t.Fatal("README.md has no **Metrics** section")
	}
	var names []string
	code := regexp.MustCompile("`([a-z_]+)(?:\\{[a-z,]*\\})?`")
	inTable := false
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cell := strings.Split(line, "|")[1]
		prefix := ""
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			name := m[1]
			if strings.HasPrefix(name, "mcpstream_") {
				parts := strings.SplitN(name, "_", 3)
				prefix = parts[0] + "_" + parts[1]
			} else if strings.HasPrefix(name, "_") && prefix != "" {
				name = prefix + name
			} else {
				continue
			}
			names = append(names, name)
		}
	}
	return names
}

// TestReadmeMetricsMatchRegistered: README's /metrics table names every metric metrics.go
// registers, and none it does not.
func TestReadmeMetricsMatchRegistered(t *testing.T) {
	reg := registeredMetrics(t)
	doc := readmeMetrics(t, readmeText(t))
	for _, m := range reg {
		if !slices.Contains(doc, m) {
			t.Errorf("metric %s is registered but not in README's /metrics table", m)
		}
	}
	for _, m := range doc {
		if !slices.Contains(reg, m) {
			t.Errorf("README's /metrics table names %s, which metrics.go does not register", m)
		}
	}
}

// subjectsCodes are the values of the Code* string constants of package subjects, by file.
func subjectsCodes(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, file := range []string{"calls.go", "events.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "subjects", file), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						out[file] = append(out[file], s)
					}
				}
			}
		}
	}
	if len(out["calls.go"]) < 15 || len(out["events.go"]) < 10 {
		t.Fatalf("codes found: %v: fewer than expected", out)
	}
	return out
}

// TestReadmeListsEveryErrorCode: every error code of calls and catalog replies (subjects,
// calls.go) has a row of README's error code table, every row names such a code (or
// invalid_schema, which calls share with rejected definitions), and every code of registry
// events (events.go) is named in README.
func TestReadmeListsEveryErrorCode(t *testing.T) {
	readme := readmeText(t)
	codes := subjectsCodes(t)
	_, section, ok := strings.Cut(readme, "Error codes (`error.code`")
	if !ok {
		t.Fatal("README.md has no error code table")
	}
	var rows []string
	code := regexp.MustCompile("`([a-z_]+)`")
	inTable := false
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cell := strings.Split(line, "|")[1]
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			rows = append(rows, m[1])
		}
	}
	for _, c := range codes["calls.go"] {
		if !slices.Contains(rows, c) {
			t.Errorf("error code %s (subjects/calls.go) has no row in README's error code table", c)
		}
	}
	for _, c := range rows {
		if !slices.Contains(codes["calls.go"], c) && !slices.Contains(codes["events.go"], c) {
			t.Errorf("README's error code table lists %s, which is no code of package subjects", c)
		}
	}
	for _, c := range codes["events.go"] {
		if !strings.Contains(readme, "`"+c+"`") {
			t.Errorf("registry code %s (subjects/events.go) is not named in README", c)
		}
	}
}
