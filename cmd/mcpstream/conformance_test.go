package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/testdeps"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in testdeps)
// tests MCP clients: for each scenario it serves a scripted MCP server, runs the client under test
// with the server's URL as its last argument, and checks what the client sent. The client under
// test here is the product: this test binary, re-executed with envConformanceClient set, runs
// `mcpstream up` (in-process, loopback only) with that server configured (transport http), waits
// for it to be ready, and calls the scenario's tool with `mcpstream call` — the connector
// (registrysync: mcp-go's client and the connector's own HTTP code) and the executor as a user
// meets them.
//
// Scenarios left out: auth/* (the connector has no OAuth: credentials are configured headers)
// and elicitation-sep1034-client-defaults (the host declares no elicitation capability and
// answers elicitation requests -32601: there is nobody to ask).

// envConformanceClient makes the test binary the client under test of a conformance scenario
// (see conformanceClient); its value is the scenario's tool call, "" when none.
const envConformanceClient = "MCPSTREAM_TEST_CONFORMANCE_CLIENT"

// conformanceScenarios are the client scenarios that apply to the connector, each at the spec
// versions it covers (the suite's --spec-version), with the tool the scenario asks the client to
// call ("NAME ARGS_JSON"; "": connecting and listing is the behaviour under test).
var conformanceScenarios = []struct {
	scenario, version, call string
}{
	{"initialize", "2025-11-25", ""},
	{"tools_call", "2025-11-25", `add_numbers {"a":2,"b":3}`},
	{"tools_call", "2026-07-28", `add_numbers {"a":2,"b":3}`},
	{"sse-retry", "2025-11-25", `test_reconnection {}`},
	{"request-metadata", "2026-07-28", ""},
}

// conformanceTimeout is the suite's --timeout for one scenario's client (it kills the client
// then, and fails the scenario): a bound, not a performance target — a scenario takes a few
// seconds.
const conformanceTimeout = 90 * time.Second

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// TestConformanceClient runs the MCP conformance suite's client scenarios against mcpstream.
// It fails with every check the suite failed or warned about, and the client's output.
func TestConformanceClient(t *testing.T) {
	t.Parallel()
	node, cli := testdeps.Conformance(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The suite splits --command at spaces and runs it with a shell.
	if strings.ContainsAny(exe, " \t\n'\"\\$`;&|<>()*?[]#~") {
		t.Fatalf("the test binary's path %q cannot be passed to the conformance suite as a command: set TMPDIR/GOTMPDIR to a plain path", exe)
	}
	for _, sc := range conformanceScenarios {
		t.Run(sc.scenario+"@"+sc.version, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout+30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, cli, "client", "--command", exe, "--scenario", sc.scenario,
				"--spec-version", sc.version, "--timeout", fmt.Sprint(conformanceTimeout.Milliseconds()), "-o", out)
			cmd.Env = append(os.Environ(), envConformanceClient+"="+sc.call, "HOME="+t.TempDir(), "NO_COLOR=1")
			var suiteOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &suiteOut, &suiteOut
			runErr := cmd.Run()

			results, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			if len(results) != 1 {
				t.Fatalf("conformance suite: %v, %d results; output:\n%s", runErr, len(results), suiteOut.String())
			}
			data, err := os.ReadFile(results[0])
			if err != nil {
				t.Fatal(err)
			}
			var checks []conformanceCheck
			if err := json.Unmarshal(data, &checks); err != nil {
				t.Fatalf("checks.json: %v", err)
			}
			var bad []string
			passed := 0
			for _, c := range checks {
				switch c.Status {
				case "FAILURE", "WARNING":
					bad = append(bad, fmt.Sprintf("%s %s (%s): %s %s", c.Status, c.Name, c.ID, c.ErrorMessage, tail(c.Details, 300)))
				case "SUCCESS":
					passed++
				}
			}
			clientErr, _ := os.ReadFile(filepath.Join(filepath.Dir(results[0]), "stderr.txt"))
			if len(bad) > 0 || passed == 0 || runErr != nil {
				t.Errorf("conformance %s at %s: %d checks passed, exit %v; failed checks:\n  %s\nclient stderr (last 4 KiB):\n%s",
					sc.scenario, sc.version, passed, runErr, strings.Join(bad, "\n  "), tail(clientErr, 4096))
			}
		})
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// upStart is up's start line: its NATS and HTTP URLs.
var upStart = regexp.MustCompile(`NATS (nats://[^\s,]+), HTTP (http://[^\s,]+)`)

// conformanceClient is the client under test of a scenario (see TestConformanceClient): the
// scenario server's URL is the last argument, call is the tool to call ("NAME ARGS_JSON", "":
// none). It exits 0 when up connected to the server (and the call succeeded).
func conformanceClient(args []string, call string) int {
	if err := runConformanceClient(args, call); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		return 1
	}
	return 0
}

func runConformanceClient(args []string, call string) error {
	if len(args) == 0 {
		return errors.New("no server URL")
	}
	// The suite's server listens on every interface and names it localhost: loopback it is.
	url := strings.Replace(args[len(args)-1], "://localhost:", "://127.0.0.1:", 1)
	// (Within the suite's timeout, so that the client says what it waited for.)
	ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout*2/3)
	defer cancel()
	dir, err := os.MkdirTemp("", "mcpstream-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "mcpstream.yaml")
	if err := os.WriteFile(cfg, []byte("servers:\n  - name: conf\n    transport: http\n    url: "+url+"\n"), 0o600); err != nil {
		return err
	}

	upCtx, stopUp := context.WithCancel(ctx)
	defer stopUp()
	upOut, upErr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(upCtx, []string{"up", "--config", cfg, "--data", filepath.Join(dir, "data"),
			"--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, upOut, upErr)
	}()
	defer func() {
		stopUp()
		<-done
		os.Stderr.WriteString(upErr.String()) // (in the scenario's stderr.txt)
	}()

	// Wait (bounded by ctx) for up's start line, for every role to run (/healthz 200), then for
	// the server to be ready with its tools.
	var nats, health string
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	wait := func(what string) error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("up exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-tick.C:
			return nil
		}
	}
	for nats == "" {
		if m := upStart.FindStringSubmatch(upOut.String()); m != nil {
			nats, health = m[1], m[2]+"/healthz"
			break
		}
		if err := wait("up did not start"); err != nil {
			return err
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := hc.Get(health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if err := wait("up's roles did not start"); err != nil {
			return err
		}
	}
	tool, toolArgs, _ := strings.Cut(call, " ")
	var last string
	for {
		var o, e bytes.Buffer
		if err := run(ctx, []string{"servers", "--json", "--nats", nats}, &o, &e); err == nil {
			var rows []serverRow
			_ = json.Unmarshal(o.Bytes(), &rows)
			if len(rows) == 1 {
				last = fmt.Sprintf("%s %s %s", rows[0].Status, rows[0].Code, rows[0].Reason)
				if rows[0].Status == "ready" && (tool == "" || rows[0].Tools > 0) {
					break
				}
			}
		}
		if err := wait("server conf not ready (last: " + last + ")"); err != nil {
			return err
		}
	}
	if tool == "" {
		return nil
	}
	// The executor follows the registry on its own: until it has the list, the tool is
	// not_found (nothing ran), and the call is made again.
	for {
		var e bytes.Buffer
		err := run(ctx, []string{"call", "conf__" + tool, toolArgs, "--nats", nats}, os.Stdout, io.MultiWriter(&e, os.Stderr))
		if err == nil {
			return nil
		}
		if !strings.Contains(e.String(), "not_found") {
			return fmt.Errorf("call conf__%s: %v", tool, err)
		}
		if err := wait(fmt.Sprintf("call conf__%s: %v", tool, err)); err != nil {
			return err
		}
	}
}
