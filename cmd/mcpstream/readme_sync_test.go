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

// helpFlags are the flags `mcpstream CMD --help` lists, each with the default it shows ("" when
// it shows none: the flag's zero value).
func helpFlags(t *testing.T, cmd ...string) map[string]string {
	t.Helper()
	o, e, err := catRun(t, append(slices.Clone(cmd), "--help")...)
	if err != nil {
		t.Fatalf("%s --help: %v", strings.Join(cmd, " "), err)
	}
	flags := map[string]string{}
	name, desc := "", ""
	flush := func() {
		if name == "" {
			return
		}
		def := ""
		if m := regexp.MustCompile(`\(default (.*)\)$`).FindStringSubmatch(strings.TrimSpace(desc)); m != nil {
			def = m[1]
			if u, err := strconv.Unquote(def); err == nil {
				def = u
			}
		}
		flags[name] = def
	}
	start := regexp.MustCompile(`^  -([a-z][a-z0-9-]*)`)
	for line := range strings.Lines(o + e) {
		if m := start.FindStringSubmatch(line); m != nil {
			flush()
			name, desc = m[1], ""
		} else if name != "" && strings.HasPrefix(line, "    \t") {
			desc += " " + strings.TrimSpace(line)
		} else {
			flush()
			name = ""
		}
	}
	flush()
	if len(flags) == 0 {
		t.Fatalf("%s --help lists no flags", strings.Join(cmd, " "))
	}
	return flags
}

// commandOf is the command of helpCommands that words (a command line without "mcpstream")
// starts with, the longest one, or nil.
func commandOf(words []string) []string {
	var best []string
	for _, c := range helpCommands {
		if len(c) <= len(words) && slices.Equal(c, words[:len(c)]) && len(c) > len(best) {
			best = c
		}
	}
	return best
}

// TestReadmeFlagsBelongToTheirCommand: a flag README shows with a command (`search --k 500`, a
// command line of a code block, the flags of a row of the CLI table) is one that command takes.
func TestReadmeFlagsBelongToTheirCommand(t *testing.T) {
	readme := readmeText(t)
	help := map[string]map[string]string{}
	flagsOf := func(c []string) map[string]string {
		k := strings.Join(c, " ")
		if help[k] == nil {
			help[k] = helpFlags(t, c...)
		}
		return help[k]
	}
	flagRef := regexp.MustCompile(`(?:^|\s|\[)--([a-z][a-z0-9-]*)`)
	check := func(where string, cmds [][]string, text string) {
		for _, m := range flagRef.FindAllStringSubmatch(text, -1) {
			if m[1] == "help" {
				continue
			}
			ok := false
			for _, c := range cmds {
				_, ok = flagsOf(c)[m[1]]
				if ok {
					break
				}
			}
			if !ok {
				t.Errorf("README %s: --%s is no flag of %v", where, m[1], cmds)
			}
		}
	}
	// Inline code and code block lines that are a command line.
	n := 0
	line := regexp.MustCompile("(?m)(?:`|^)(?:mcpstream |go run \\./cmd/mcpstream )?([a-z][a-z-]*(?: [a-z][a-z-]*)?) ([^`\\n#]*--[^`\\n#]*)")
	for _, m := range line.FindAllStringSubmatch(readme, -1) {
		c := commandOf(strings.Fields(m[1]))
		if c == nil {
			continue
		}
		n++
		check(strings.TrimSpace(m[0]), [][]string{c}, m[2])
	}
	if n < 20 {
		t.Errorf("found %d command lines with flags in README: fewer than expected", n)
	}
	// Rows of the CLI table: the first cell names the commands.
	_, table, ok := strings.Cut(readme, "| command | what it does |")
	if !ok {
		t.Fatal("README.md has no CLI table")
	}
	rows := 0
	for l := range strings.Lines(table) {
		if !strings.HasPrefix(l, "|") {
			if rows > 0 {
				break
			}
			continue
		}
		cells := strings.Split(l, " | ")
		if len(cells) < 2 {
			continue
		}
		var cmds [][]string
		for _, m := range regexp.MustCompile("`([a-z][a-z -]*)").FindAllStringSubmatch(cells[0], -1) {
			if c := commandOf(strings.Fields(m[1])); c != nil {
				cmds = append(cmds, c)
			}
		}
		if len(cmds) == 0 {
			continue
		}
		rows++
		check("CLI table row "+strings.TrimPrefix(cells[0], "| "), cmds, l)
	}
	if rows < 10 {
		t.Errorf("found %d CLI table rows: fewer than expected", rows)
	}
}

// TestReadmeFlagDefaults: a default README gives a flag (`--workers N` (64), `--wait` (10 s))
// is the default some command's --help shows for it (or its zero value, when it shows none).
func TestReadmeFlagDefaults(t *testing.T) {
	readme := readmeText(t)
	all := map[string][]string{}
	for _, c := range helpCommands {
		for f, def := range helpFlags(t, c...) {
			all[f] = append(all[f], def)
		}
	}
	def := regexp.MustCompile("`--([a-z][a-z0-9-]*)(?: [A-Z]+)?` \\((?:default )?(?:`([^`]+)`|([0-9]+(?:\\.[0-9]+)?)(?: ?(s|ms|m|h))?[),;:\\s])")
	n := 0
	for _, m := range def.FindAllStringSubmatch(readme, -1) {
		want := m[2]
		if want == "" {
			want = m[3] + m[4]
		}
		if strings.HasPrefix(want, "$") || strings.HasPrefix(want, "--") {
			continue // the environment's, or an example
		}
		defaults, ok := all[m[1]]
		if !ok {
			t.Errorf("README %s: no command has --%s", m[0], m[1])
			continue
		}
		n++
		t.Logf("checked %s", m[0])
		found := false
		for _, d := range defaults {
			if d == want || (d == "" && (want == "0" || want == "0s" || want == `""`)) {
				found = true
			}
		}
		if !found {
			t.Errorf("README %s: --%s defaults to %q, --help shows %q", m[0], m[1], want, defaults)
		}
	}
	if n < 8 {
		t.Errorf("found %d flag defaults in README: fewer than expected", n)
	}
}

// TestReadmeNamesEveryEnvironmentVariable: every environment variable the command reads
// (os.Getenv and os.LookupEnv of a literal or of a constant of the package) is named in README.
// GOMEMLIMIT, which overrides indexer's --memory-limit, was not.
func TestReadmeNamesEveryEnvironmentVariable(t *testing.T) {
	readme := readmeText(t)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var refs []ast.Expr
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) == 1 {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv") {
						refs = append(refs, n.Args[0])
					}
				}
			}
			return true
		})
	}
	var names []string
	for _, r := range refs {
		switch r := r.(type) {
		case *ast.BasicLit:
			s, _ := strconv.Unquote(r.Value)
			names = append(names, s)
		case *ast.Ident:
			if s, ok := consts[r.Name]; ok {
				names = append(names, s)
			}
		}
	}
	if len(names) < 6 {
		t.Fatalf("found %d environment variables read: %v: fewer than expected", len(names), names)
	}
	for _, n := range names {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `\b`).MatchString(readme) {
			t.Errorf("environment variable %s is read by mcpstream but not named in README.md", n)
		}
	}
}

// TestReadmeConfigBounds: the least value the streams and embeddedNats settings take, as the
// configuration error gives it ("want ... at least 1MiB"), is given in README's configuration
// example beside the key, and README names every size unit the settings take. auditMaxAge's
// minimum (1m), the sizes' (1MiB), sync's range and the units were not.
func TestReadmeConfigBounds(t *testing.T) {
	readme := readmeText(t)
	_, example, _ := strings.Cut(readme, "```yaml\n")
	example, _, _ = strings.Cut(example, "```")
	keyLine := func(key string) string {
		for l := range strings.Lines(example) {
			if strings.HasPrefix(strings.TrimSpace(l), key+":") {
				return l
			}
		}
		t.Fatalf("README's configuration example has no %s", key)
		return ""
	}
	least := regexp.MustCompile(`at least ([0-9][0-9A-Za-z]*)|from ([0-9][0-9A-Za-z]*) to ([0-9][0-9A-Za-z]*)`)
	for _, c := range []struct{ section, key, value string }{
		{"streams", "resultsMaxAge", "1s"},
		{"streams", "auditMaxAge", "1s"},
		{"streams", "resultsMaxBytes", "1KiB"},
		{"streams", "auditMaxBytes", "1KiB"},
		{"embeddedNats", "sync", "1ns"},
		{"embeddedNats", "maxStore", "1KiB"},
		{"embeddedNats", "maxMemory", "1KiB"},
	} {
		_, err := parseConfig("c.yaml", []byte(c.section+":\n  "+c.key+": "+c.value+"\n"), func(string) (string, bool) { return "", false })
		if err == nil {
			t.Errorf("%s.%s: %s: no error", c.section, c.key, c.value)
			continue
		}
		m := least.FindStringSubmatch(err.Error())
		if m == nil {
			t.Errorf("%s.%s: %s: error %q gives no bound", c.section, c.key, c.value, err)
			continue
		}
		line := keyLine(c.key)
		for _, b := range m[1:] {
			if b != "" && !regexp.MustCompile(`\b`+regexp.QuoteMeta(b)+`\b`).MatchString(line) {
				t.Errorf("README's %s line does not give the bound %s (%v):\n%s", c.key, b, err, line)
			}
		}
	}
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"} {
		if _, err := parseSize("3" + unit); err != nil {
			t.Fatalf("parseSize(3%s): %v", unit, err)
		}
		if !strings.Contains(readme, "`"+unit+"`") {
			t.Errorf("README does not name the size unit `%s`", unit)
		}
	}
}

// TestReadmeNamesEveryEmbeddingsCode: the codes of the embeddings endpoint's errors (package
// embeddings, in the indexer's log lines and eval retrieval's errors) are named in README; only
// embeddings_rejected was.
func TestReadmeNamesEveryEmbeddingsCode(t *testing.T) {
	readme := readmeText(t)
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "embeddings", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, id := range vs.Names {
				if strings.HasPrefix(id.Name, "Code") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						codes = append(codes, s)
					}
				}
			}
		}
		return true
	})
	if len(codes) < 4 {
		t.Fatalf("embeddings codes %v: fewer than expected", codes)
	}
	for _, c := range codes {
		if !strings.Contains(readme, "`"+c+"`") {
			t.Errorf("embeddings error code %s is not named in README.md", c)
		}
	}
}
