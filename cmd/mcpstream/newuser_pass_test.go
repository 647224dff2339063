package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A "new user" pass over the CLI: what someone who only read the README and --help runs into.

// TestUnknownCommandSuggests: a mistyped command (`mcpstream serach`) said only `unknown command
// "serach"` under the whole command list; the command meant is named.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serach", "logs"}, `did you mean "search"?`},
		{[]string{"srch", "logs"}, `did you mean "search"?`},
		{[]string{"sever"}, `did you mean "servers"?`},
		{[]string{"inpsect"}, `did you mean "inspect"?`},
		{[]string{"aprove", "c-1"}, `did you mean "approve"?`},
		{[]string{"help", "evnets"}, `did you mean "events"?`},
	} {
		_, _, err := runCmd(t, context.Background(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), "unknown command") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mcpstream %s: %v; want an unknown command error with %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// Nothing close: no guess.
	if _, _, err := runCmd(t, context.Background(), "zzzzzz"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("mcpstream zzzzzz: %v; want no suggestion", err)
	}
}

// TestHelpOfListedNames: `mcpstream help` lists `version`, but `mcpstream help version` (and
// `help help`) said `unknown command`, exit status 1.
func TestHelpOfListedNames(t *testing.T) {
	for name, want := range map[string]string{"version": "Usage: mcpstream version", "help": "Usage: mcpstream COMMAND"} {
		out, errOut, err := runCmd(t, context.Background(), "help", name)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("mcpstream help %s: %v\nstdout %q\nstderr %q", name, err, out, errOut)
		}
	}
	out, _, err := runCmd(t, context.Background(), "version", "--help")
	if err != nil || !strings.Contains(out, "Usage: mcpstream version") {
		t.Errorf("mcpstream version --help: %v, %q; want its usage", err, out)
	}
}

// TestHelpOfSubcommand: `mcpstream help policy check` and `mcpstream help servers remove` printed
// the help of policy and servers, not that of the subcommand named (which `policy check --help`
// and `servers remove --help` print).
func TestHelpOfSubcommand(t *testing.T) {
	for _, args := range [][]string{{"policy", "check"}, {"policy", "digest"}, {"servers", "remove"}, {"eval", "retrieval"}} {
		want, _, err := runCmd(t, context.Background(), append(args, "--help")...)
		if err != nil {
			t.Fatalf("%v --help: %v", args, err)
		}
		got, _, err := runCmd(t, context.Background(), append([]string{"help"}, args...)...)
		if err != nil || got != want {
			t.Errorf("mcpstream help %s: %v\n%.200s\nwant what `%s --help` prints:\n%.200s", strings.Join(args, " "), err, got, strings.Join(args, " "), want)
		}
	}
}

// TestUnknownFlagSuggests: a mistyped flag (`--principle`) printed Go's "flag provided but not
// defined: -principle" followed by the command's whole help (60 lines for servers), which
// scrolled the error out of sight. The error names the flag meant and where the flags are
// listed, and stays in sight; still exit status 2.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"search", "logs", "--principle", "acme/alice"}, "did you mean --principal?"},
		{[]string{"servers", "--jsn"}, "did you mean --json?"},
		{[]string{"events", "--sinse", "1h"}, "did you mean --since?"},
		{[]string{"call", "kb__get_document", "--tiemout", "1s"}, "did you mean --timeout?"},
		{[]string{"policy", "check", "--wiat", "1s"}, "did you mean --wait?"},
	} {
		_, errOut, err := runCmd(t, context.Background(), append(tc.args, "--nats", "nats://127.0.0.1:1")...)
		var code exitCode
		if !errors.As(err, &code) || code != 2 {
			t.Errorf("%v: %v; want exit status 2", tc.args, err)
		}
		name := tc.args[0]
		if name == "policy" {
			name = "policy check"
		}
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "mcpstream "+name+" --help") || strings.Contains(errOut, "\nFlags:") {
			t.Errorf("%v: stderr\n%s\nwant the error with %q and a pointer to `mcpstream %s --help`, not the whole help", tc.args, errOut, tc.want, name)
		}
	}
}

// TestNATSURLThatIsHTTP: `up` prints its NATS URL and its HTTP URL; given the HTTP one as --nats,
// a client waited 5 s and said "read tcp ...: i/o timeout". An http(s) URL is no NATS URL: said
// at once.
func TestNATSURLThatIsHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := runCmd(t, ctx, "servers", "--nats", srv.URL)
	if err == nil || !strings.Contains(err.Error(), "not a NATS URL") || !strings.Contains(err.Error(), "nats://") {
		t.Errorf("servers --nats %s: %v; want it named as not a NATS URL", srv.URL, err)
	}
}

// TestCallTextHidesStructuredContent: the demo ticketing__listIssues answers the text "2
// ticket(s) match, 2 returned." and the tickets in structuredContent; `call` printed the text
// alone, with no sign of the tickets. stdout keeps the text (it may go to a file), stderr says
// --json shows the structured content.
func TestCallTextHidesStructuredContent(t *testing.T) {
	res := subjects.CallResult{ID: "c-1", Tool: "ticketing__listIssues", Status: subjects.CallOK, Result: json.RawMessage(
		`{"content":[{"type":"text","text":"1 ticket(s) match, 1 returned."}],"structuredContent":{"issues":[{"id":"TCK-1","title":"Disk full"}],"total":1}}`)}
	var out, errOut strings.Builder
	if err := printCallResult(&out, &errOut, res, false); err != nil {
		t.Fatal(err)
	}
	if out.String() != "1 ticket(s) match, 1 returned.\n" {
		t.Errorf("stdout %q", out.String())
	}
	if !strings.Contains(errOut.String(), "structuredContent") || !strings.Contains(errOut.String(), "--json") {
		t.Errorf("stderr %q; want a note that --json shows the structuredContent", errOut.String())
	}
	// A structured result printed as such, or a text with no structured content: no note.
	for _, r := range []string{
		`{"content":[],"structuredContent":{"total":1}}`,
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"hello"}],"structuredContent":null}`,
	} {
		out.Reset()
		errOut.Reset()
		res.Result = json.RawMessage(r)
		if err := printCallResult(&out, &errOut, res, false); err != nil || errOut.Len() != 0 {
			t.Errorf("%s: %v, stderr %q; want nothing on stderr", r, err, errOut.String())
		}
	}
}

// TestCallArgumentsBeforeName: `call '{"title":"x"}' ticketing__createIssue` (the arguments
// first) said `ARGS_JSON must be a JSON object ... (got "ticketing__createIssue")`, which reads
// as if the tool name were wrong. It says the order.
func TestCallArgumentsBeforeName(t *testing.T) {
	_, errOut, err := runCmd(t, context.Background(), "call", `{"title":"x"}`, "ticketing__createIssue", "--nats", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error()+errOut, "NAME first") {
		t.Errorf("call ARGS NAME: %v %q; want the order said", err, errOut)
	}
}

// TestDurationFlagValue: `call --timeout 5` said `invalid value "5" for flag -timeout: parse
// error` (Go's flag package drops time.ParseDuration's reason): it says what a duration is.
func TestDurationFlagValue(t *testing.T) {
	for _, args := range [][]string{
		{"call", "kb__get_document", "--timeout", "5"},
		{"search", "logs", "--timeout", "5"},
	} {
		_, errOut, err := runCmd(t, context.Background(), append(args, "--nats", "nats://127.0.0.1:1")...)
		var code exitCode
		if !errors.As(err, &code) || code != 2 {
			t.Errorf("%v: %v; want exit status 2", args, err)
		}
		if !strings.Contains(errOut, "want a duration") {
			t.Errorf("%v: stderr %q; want what a duration is", args, errOut)
		}
	}
}

// TestPrincipalFromEnvironment: a bad $MCPSTREAM_PRINCIPAL left from another session said `bad
// principal: "acme/"` to a user who gave no --principal: it names the variable.
func TestPrincipalFromEnvironment(t *testing.T) {
	t.Setenv(envPrincipal, "acme/")
	_, _, err := runCmd(t, context.Background(), "search", "logs", "--nats", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "$"+envPrincipal) {
		t.Errorf("search with %s=acme/: %v; want the variable named", envPrincipal, err)
	}
	_, _, err = runCmd(t, context.Background(), "search", "logs", "--principal", "bob/", "--nats", "nats://127.0.0.1:1")
	if err == nil || strings.Contains(err.Error(), "$"+envPrincipal) {
		t.Errorf("search --principal bob/: %v; want the flag's value blamed, not the variable", err)
	}
}

// TestSubcommandTypoSuggests: `policy chek` and `servers remov kb` named no subcommand meant.
func TestSubcommandTypoSuggests(t *testing.T) {
	_, errOut, err := runCmd(t, context.Background(), "policy", "chek")
	var code exitCode
	if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, `did you mean "policy check"?`) {
		t.Errorf("policy chek: %v %q", err, errOut)
	}
	_, _, err = runCmd(t, context.Background(), "servers", "remov", "kb", "--nats", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), `did you mean "servers remove"?`) {
		t.Errorf("servers remov kb: %v", err)
	}
}

// TestDefaultPrincipalUnknownHint: under a policy that lists principals, `mcpstream search logs`
// (no --principal) answered `unknown_principal: unknown principal: "local" is not a principal
// of tenant "local"`, never saying that the CLI sent local/local for want of --principal. With
// the default principal the message says to give one; with one given (or with --json, the
// server's message as it is) it does not.
func TestDefaultPrincipalUnknownHint(t *testing.T) {
	t.Setenv(envPrincipal, "")
	cfg := filepath.Join(t.TempDir(), "mcpstream.yaml")
	if err := os.WriteFile(cfg, []byte("servers: []\npolicy:\n  principals:\n    alice: {roles: [support]}\n  rules:\n    - {name: support, roles: [support], allow: ['*']}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUp(t, "--config", cfg)
	waitFor(t, "up healthy", 600, func() bool { code, _ := p.healthz(t); return code == 200 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"search", "logs"}, {"inspect", "kb__get_document"}, {"servers", "--catalog"}, {"call", "kb__get_document", "{}"},
	} {
		_, errOut, err := runCmd(t, ctx, append(args, "--nats", p.nats)...)
		text := errOut
		if err != nil {
			text += err.Error()
		}
		if err == nil || !strings.Contains(text, "unknown_principal") || !strings.Contains(text, "--principal") {
			t.Errorf("%v without --principal: %v\n%s\nwant unknown_principal and a word on --principal", args, err, errOut)
		}
		_, errOut, err = runCmd(t, ctx, append(args, "--nats", p.nats, "--principal", "bob")...)
		text = errOut
		if err != nil {
			text += err.Error()
		}
		if err == nil || !strings.Contains(text, "unknown_principal") || strings.Contains(text, "without --principal") {
			t.Errorf("%v --principal bob: %v\n%s\nwant unknown_principal, no hint", args, err, errOut)
		}
	}
}
