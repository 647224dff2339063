package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsHostileServerAndType: registry server names (decoded from a subject token) and the
// type of audit and results payloads are text from outside; they used to reach the terminal
// with their escape sequences.
func TestEventsHostileServerAndType(t *testing.T) {
	const evil = "\x1b[31mEVIL\u202e"
	p := &eventPrinter{prev: map[string][]string{}}
	enc := func(v any) []byte { b, _ := json.Marshal(v); return b }
	cases := map[string]string{
		"changed": p.summary(subjects.RegistryChanged(evil, subjects.KindTools),
			enc(subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: evil, Kind: subjects.KindTools})),
		"status": p.summary(subjects.RegistryStatus(evil),
			enc(subjects.Status{V: 1, Type: subjects.EventStatus, Server: evil, Status: "ready"})),
		"snapshot": p.summary(subjects.RegistrySnapshot(evil, subjects.KindTools),
			enc(subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: evil, Kind: subjects.KindTools})),
		"revoked": p.summary(subjects.Root+".registry."+subjects.EncodeToken(evil)+".revoked",
			enc(subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: evil})),
		"audit type":  p.summary(subjects.Root+".audit.local.decision", []byte(`{"type":"\u001b]0;pwned\u0007","id":"x"}`)),
		"raw subject": p.summary(subjects.Root+".audit.local.\x1b[35mX", []byte(`not json`)),
	}
	for name, got := range cases {
		if strings.ContainsAny(got, "\x1b\x07\u202e") {
			t.Errorf("%s: control or format characters reach the terminal: %q", name, got)
		}
		if got == "" {
			t.Errorf("%s: empty summary", name)
		}
	}
}

// TestRedactNATSURL: the token of nats://TOKEN@host was printed (only a password was hidden),
// and a URL that does not parse came back whole in the connection error.
func TestRedactNATSURL(t *testing.T) {
	for u, want := range map[string]string{
		"nats://s3cr3ttoken@127.0.0.1:4222":                 "nats://***@127.0.0.1:4222",
		"nats://bob:pw@127.0.0.1:1,nats://tok456@h:2":       "nats://bob:***@127.0.0.1:1,nats://***@h:2",
		"nats://127.0.0.1:4222":                             "nats://127.0.0.1:4222",
		"tls://alice:p%40ss@example.com:4443,nats://x:4222": "tls://alice:***@example.com:4443,nats://x:4222",
	} {
		if got := redactURL(u); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", u, got, want)
		}
	}
	raw := "nats://bob:hunter22@[::1"
	_, perr := url.Parse(raw)
	err := &scrubbedError{msg: scrubCredentials(perr.Error(), raw), err: perr}
	if strings.Contains(err.Error(), "hunter22") || !errors.As(error(err), new(*url.Error)) {
		t.Errorf("scrubbed error %q (still wraps the url.Error: %v)", err, errors.As(error(err), new(*url.Error)))
	}
}

// TestConfigValidatedUpFront: invalid configuration is refused before anything starts; limits,
// protocol versions and values that become empty after ${ENV} expansion used to pass and fail
// only once NATS, the streams and the MCP children had started.
func TestConfigValidatedUpFront(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "EMPTY" {
			return "", true
		}
		return "", false
	}
	for name, y := range map[string]string{
		"negative limit": "servers: []\nlimits:\n  tenant: {perSecond: -1}\n",
		"bad tool glob":  "servers: []\nlimits:\n  tools:\n    \"[x\": {perSecond: 1}\n",
		// Valid as a whole, not once split at __ as MatchTool matches it: it never applied.
		"split tool glob": "servers: []\nlimits:\n  tools:\n    \"[a__b]*\": {perSecond: 1}\n",
		"empty policy":    "servers: []\npolicy:\n#  rules: []\n",
		"protocol":        "servers:\n  - name: a\n    command: x\n    protocolVersion: 9999-99-99\n",
		"empty command":   "servers:\n  - name: a\n    command: ${EMPTY}\n",
		"empty url":       "servers:\n  - name: a\n    transport: http\n    url: ${EMPTY}\n",
	} {
		if _, err := parseConfig("c.yaml", []byte(y), lookup); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "c.yaml") {
			t.Errorf("%s: %v: want the file named", name, err)
		}
	}
}

// TestSecretValuesAsConnectorRedacts: the executor's audit redaction knows every value the
// connector treats as secret (*KEY*, *AUTH*, URL query parameters); literal PRIVATE_KEY and
// X_AUTH values used to reach audit events in clear.
func TestSecretValuesAsConnectorRedacts(t *testing.T) {
	cfg, err := parseConfig("c.yaml", []byte("servers:\n  - name: a\n    command: x\n    env:\n      PRIVATE_KEY: literalprivkey123\n      X_AUTH: literalauth123\n"+
		"  - name: b\n    url: https://example.com/mcp?api_key=querysecret9\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sc := range cfg.ServerConfigs() {
		got = append(got, sc.Secrets...)
	}
	for _, s := range []string{"literalprivkey123", "literalauth123", "querysecret9"} {
		if !strings.Contains(strings.Join(got, ","), s) {
			t.Errorf("%s not among the secrets the executor redacts (%q)", s, got)
		}
	}
}

// TestSearchJSONWithoutCatalog: search --json and inspect --json promise {"error":{...}} on
// stdout on an error; with no catalog replica running they printed nothing there.
func TestSearchJSONWithoutCatalog(t *testing.T) {
	env := natstest.Start(t)
	for _, args := range [][]string{{"search", "logs"}, {"inspect", "kb__get_document"}} {
		out, _, err := catRun(t, append(args, "--json", "--timeout", "2s", "--nats", env.URL)...)
		var v struct {
			Error *subjects.Error `json:"error"`
		}
		if err == nil || json.Unmarshal([]byte(out), &v) != nil || v.Error == nil || v.Error.Code != subjects.CodeUnavailable {
			t.Errorf("%v: stdout %q, err %v: want {\"error\":{\"code\":\"unavailable\",...}} and a failure", args, out, err)
		}
	}
}

// TestUpInterruptedWhileStarting: a signal while up starts is a clean stop, as once it serves (it
// failed with "context canceled" and exit status 1).
func TestUpInterruptedWhileStarting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal arrived while the embedded server was starting
	var stdout, stderr syncBuffer
	if err := run(ctx, []string{"up", "--data", t.TempDir(), "--nats-listen", "none", "--http-listen", ""}, &stdout, &stderr); err != nil {
		t.Errorf("err %v, want a clean stop\n%s", err, stderr.String())
	}
	if err := run(context.Background(), []string{"up", "--data", t.TempDir(), "--stop-timeout", "0s"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--stop-timeout") {
		t.Errorf("--stop-timeout 0s: %v", err)
	}
}

// TestCallNamesItsID: without --id the timeout hint named no call id (the library chose it):
// the user could neither find the answer nor ask again without running the call twice.
// --approval-timeout -1, as documented, was refused as a duration.
func TestCallNamesItsID(t *testing.T) {
	env := natstest.Start(t)
	// A front end that never answers.
	if _, err := env.NC.Subscribe(subjects.ExecAll, func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	// The server has the subscription before the call's connection asks (else: no responders).
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut, _ := runCmd(t, ctx, "call", "kb__x", "--json", "--wait", "300ms", "--approval-timeout", "-1", "--nats", env.URL)
	var v struct {
		Error *subjects.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Error == nil {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if strings.Contains(v.Error.Message, "--id  ") || strings.Contains(v.Error.Message, "results.local.~'") || !strings.Contains(v.Error.Message, "--id c-") {
		t.Errorf("the hint names no call id: %s", v.Error.Message)
	}
}

// TestCallTextForTerminal: call's text output held the server's text as is, escape sequences
// included (search and inspect removed them).
func TestCallTextForTerminal(t *testing.T) {
	var out, errOut strings.Builder
	res := subjects.CallResult{Status: subjects.CallOK, Result: json.RawMessage(`{"content":[{"type":"text","text":"line 1\n\u001b[2Jline\t2\u202e"}]}`)}
	if err := printCallResult(&out, &errOut, res, false); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.ContainsAny(got, "\x1b\u202e") || !strings.Contains(got, "line 1\n") || !strings.Contains(got, "line\t2") {
		t.Errorf("got %q", got)
	}
	out.Reset()
	res = subjects.CallResult{Status: subjects.CallFailed, Error: &subjects.Error{Code: "protocol_error", Message: "server said \u001b]0;pwned\u0007"}}
	_ = printCallResult(&out, &errOut, res, false)
	if strings.ContainsAny(errOut.String(), "\x1b\x07") {
		t.Errorf("error message reaches the terminal raw: %q", errOut.String())
	}
}

// TestPrincipalRolesEverywhere: --principal acme/alice:support is alice with the support role
// for call as for search (call took "alice:support" as the user name).
func TestPrincipalRolesEverywhere(t *testing.T) {
	cf := clientFlags{Principal: "acme/alice:support,ops", Roles: "audit"}
	pr, err := cf.principal()
	if err != nil || pr.Tenant != "acme" || pr.User != "alice" || strings.Join(pr.Roles, ",") != "support,ops,audit" {
		t.Errorf("got %+v %v", pr, err)
	}
}

// TestCallStructuredForTerminal: structured content and a validation path were printed as the
// server sent them (JSON text may hold raw format characters; keys may hold ESC).
func TestCallStructuredForTerminal(t *testing.T) {
	sc := `{"name":"invoice` + "\u202e" + `fdp.exe"}`
	txt, _ := json.Marshal(sc)
	res := subjects.CallResult{ID: "x", Status: subjects.CallOK, Result: json.RawMessage(
		`{"content":[{"type":"text","text":` + string(txt) + `}],"structuredContent":` + sc + `}`)}
	var out, errOut strings.Builder
	_ = printCallResult(&out, &errOut, res, false)
	if strings.ContainsRune(out.String(), '\u202e') {
		t.Errorf("a format character reached the terminal: %q", out.String())
	}
	res = subjects.CallResult{Status: subjects.CallRefused, Error: &subjects.Error{Code: "invalid_arguments", Message: "m", Path: "/a\x1b[2J"}}
	_ = printCallResult(&out, &errOut, res, false)
	if strings.Contains(errOut.String(), "\x1b") {
		t.Errorf("the path reached the terminal raw: %q", errOut.String())
	}
}

// TestPrintToolFullLongTTL: a ttlMs past what a time.Duration holds is shown capped, not wrapped
// around to a negative duration.
func TestPrintToolFullLongTTL(t *testing.T) {
	ms := int64(1e13)
	var b strings.Builder
	printToolFull(&b, subjects.ToolInfo{TTLMs: &ms})
	if strings.Contains(b.String(), "ttl -") {
		t.Errorf("printed %q", b.String())
	}
}

// TestShortSecretsAsConnectorRedacts: a 3-byte value is redacted by the connector (redact.MinLen)
// — a credential-like header's, or a resolved ${VAR} — but the configuration dropped values
// under 4 bytes from ServerConfig.Secrets: a resolved 3-byte ${VAR} in args was redacted
// nowhere, and a 3-byte header credential the connector redacts reached audit events in clear.
func TestShortSecretsAsConnectorRedacts(t *testing.T) {
	env := map[string]string{"PIN": "xq7"}
	cfg, err := parseConfig("c.yaml", []byte("servers:\n  - name: a\n    command: x\n    args: [\"--pin=${PIN}\"]\n"+
		"  - name: b\n    transport: http\n    url: https://example.com/mcp\n    headers:\n      X-Api-Key: k9z\n"),
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sc := range cfg.ServerConfigs() {
		got = append(got, sc.Secrets...)
	}
	for _, s := range []string{"xq7", "k9z"} {
		if !slices.Contains(got, s) {
			t.Errorf("%s not among the secrets (%q)", s, got)
		}
	}
}

// TestArgsSecretsForExecutor: literal credentials in a stdio server's args (--token=X,
// --password X) are among the secrets the executor redacts from audit events, as the connector
// redacts them from status reasons and logs; the other arguments are not.
func TestArgsSecretsForExecutor(t *testing.T) {
	cfg, err := parseConfig("c.yaml", []byte("servers:\n  - name: a\n    command: srv\n    args: [\"--token=literaltok123\", \"--password\", \"literalpw456\", \"--port\", \"8080\", \"--auth\", \"oauth\"]\n"),
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sc := range cfg.ServerConfigs() {
		got = append(got, sc.Secrets...)
	}
	for _, s := range []string{"literaltok123", "literalpw456"} {
		if !slices.Contains(got, s) {
			t.Errorf("%s not among the secrets the executor redacts (%q)", s, got)
		}
	}
	for _, s := range []string{"8080", "oauth", "--port", "srv"} {
		if slices.Contains(got, s) {
			t.Errorf("%s is among the secrets (%q)", s, got)
		}
	}
}
