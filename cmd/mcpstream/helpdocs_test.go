package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestHelpFlagsHeaderOnlyWithFlags: `policy --help` (a command whose own flag set is empty: its
// flags belong to policy check and policy digest) ended with a "Flags:" header and nothing under
// it.
func TestHelpFlagsHeaderOnlyWithFlags(t *testing.T) {
	out, _, err := catRun(t, "policy", "--help")
	if err != nil {
		t.Fatalf("policy --help: %v", err)
	}
	if strings.HasSuffix(strings.TrimSpace(out), "Flags:") {
		t.Errorf("policy --help ends with an empty Flags: header:\n%s", out)
	}
	// Commands with flags still list them under the header.
	out, _, err = catRun(t, "policy", "check", "--help")
	if err != nil || !strings.Contains(out, "\nFlags:\n  -config") {
		t.Errorf("policy check --help: %v, want its flags under Flags:\n%s", err, out)
	}
}

// TestConfigFlagHelpNamesEverySection: the --config help of up and the role subcommands listed
// the sections servers, policy, limits, search and streams, but not embeddedNats, which the file
// may hold (README Configuration).
func TestConfigFlagHelpNamesEverySection(t *testing.T) {
	var sections []string
	ft := reflect.TypeFor[fileConfig]()
	for i := range ft.NumField() {
		name, _, _ := strings.Cut(ft.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			sections = append(sections, name)
		}
	}
	if len(sections) < 6 {
		t.Fatalf("fileConfig sections %v: fewer than expected", sections)
	}
	for _, cmd := range []string{"up", "registrysync", "indexer", "executor"} {
		out, _, err := catRun(t, cmd, "--help")
		if err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		_, after, ok := strings.Cut(out, "\n  -config string\n")
		if !ok {
			t.Fatalf("%s --help lists no -config flag:\n%s", cmd, out)
		}
		line, _, _ := strings.Cut(after, "\n")
		for _, s := range sections {
			if !regexp.MustCompile(`\b` + s + `\b`).MatchString(line) {
				t.Errorf("%s --help: -config help %q does not name the section %s", cmd, strings.TrimSpace(line), s)
			}
		}
	}
}

// TestEvalExamplesNameRepositoryFiles: the eval retrieval example of `eval --help` and of the
// README named ../shared/eval/retrieval/..., a path outside the repository that a user of it
// does not have; the files are in testdata/eval/retrieval.
func TestEvalExamplesNameRepositoryFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	out, _, err := catRun(t, "eval", "retrieval", "--help")
	if err != nil {
		t.Fatalf("eval retrieval --help: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	flagPath := regexp.MustCompile(`--(?:tools|queries) (\S+\.jsonl)`)
	for name, text := range map[string]string{"eval retrieval --help": out, "README.md": string(readme)} {
		paths := flagPath.FindAllStringSubmatch(text, -1)
		if len(paths) < 2 {
			t.Errorf("%s: no eval retrieval example with --tools and --queries files", name)
		}
		for _, m := range paths {
			if !filepath.IsLocal(m[1]) {
				t.Errorf("%s: example names %s, outside the repository", name, m[1])
				continue
			}
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("%s: example names %s, which is not a file of the repository (run from its root): %v", name, m[1], err)
			}
		}
	}
	if strings.Contains(out, "shared/eval") {
		t.Errorf("eval retrieval --help names shared/eval, outside the repository:\n%s", out)
	}
}
