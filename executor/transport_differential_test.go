package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// The same MCP server reached over each transport mcpstream supports — stdio (the connector
// writes to the child's stdin and scans its stdout itself), streamable HTTP and legacy
// HTTP+SSE — must give the same catalog (the raw tools/list definitions, the snapshot's
// fingerprint, the tool names) and, for the same seeded calls, the same answers through the
// executor; and the same answers as a direct mcp-go client call to another instance of it
// over stdio (the raw JSON-RPC result, or its error).
//
// Servers: npm's server-everything (stdio; streamableHttp and sse on 127.0.0.1), the demo
// servers ticketing, kb and logging (stdio children; their HTTP handler's /mcp and /sse, one
// instance per transport: they keep state), and newTransportFixture (results of chosen sizes,
// notifications before the answer, a JSON-RPC error, the arguments echoed). Arguments come
// from each tool's inputSchema: edge strings (unicode, U+2028, a lone surrogate escape,
// control characters, 3,000 bytes), numbers (1e308, 2^53+1, 30 digits, -0, 5e-324), nested
// objects, optional members left out, and invalid ones (a required member missing, a wrong
// type, an extra member, arguments that are not an object). list_changed: hiding a demo
// tool through each instance's control file gives the same new list everywhere.
//
// Legitimate differences, normalised or passed over:
//   - times (ticketing's createdAt/closedAt, logging's entries, generated from the time the
//     server started; server-everything's "created at 2:42:41 PM"), server-everything's task
//     ids (random) and session ids ("undefined" over stdio, the HTTP session's UUID
//     otherwise) are replaced by placeholders;
//   - everything's get-env lists the environment of its process: the stdio child's is the
//     minimal one, the HTTP servers' the test's: compared by shape only;
//   - simulate-research-query requires a task: the connector runs it as one, the direct
//     client's plain tools/call is refused by the server (its direct call is not compared;
//     4 s a call, it runs in long runs only: MCPSTREAM_TRANSPORT_SEEDS set);
//   - a refusal by the executor before dispatch (invalid_arguments: the tool's inputSchema;
//     bad_request) is not sent to the direct client, which would ask the server, nor a result
//     over the executor's 4 MiB (result_too_large, whose message says over HTTP that no event
//     holds it when it is over that bound, and the executor's size otherwise);
//   - the executor cuts a server's JSON-RPC error message to 1 KiB;
//   - the direct client negotiates as the connector does (2026-07-28 first) and sends the
//     _meta that version asks for; it decodes nothing: the server's raw result is compared,
//     canonicalised (members sorted, numbers as written).

// transportSeed is the first seed of TestTransportDifferential (MCPSTREAM_TRANSPORT_SEED0 and
// _SEEDS choose others).
const transportSeed = 20261202

// everythingListener is a node --import preload that makes server-everything's express
// listen on 127.0.0.1 only (it listens on every interface given just PORT).
const everythingListener = `import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
`

// startEverythingHTTP runs server-everything (entry, see npmServer) with transport mode
// ("streamableHttp", "sse") on a free loopback port, listening on 127.0.0.1 only
// (everythingListener), and returns its base URL.
func startEverythingHTTP(t *testing.T, entry, mode string) string {
	t.Helper()
	preload := filepath.Join(t.TempDir(), "listen-loopback.mjs")
	if err := os.WriteFile(preload, []byte(everythingListener), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	cmd := exec.Command("node", "--import", preload, entry, mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(waitLimit):
			t.Errorf("server-everything %s (pid %d) did not exit", mode, cmd.Process.Pid)
		}
	})
	return "http://127.0.0.1:" + port
}

// serveDemoHTTP serves one instance of a demo server on a loopback port (its own state and
// control file) and returns its base URL.
func serveDemoHTTP(t *testing.T, name, control string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- demoservers.ServeHTTPListener(ctx, name, demoservers.Options{
			ControlFile: control, ControlInterval: 10 * time.Millisecond, Logs: 3000, ErrorLog: io.Discard,
		}, ln)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Errorf("demo server %s did not stop", name)
		}
	})
	return "http://" + ln.Addr().String()
}

// transportFamily is one server reached over each transport, plus its direct client.
type transportFamily struct {
	name    string   // family name: the servers are NAME-stdio, NAME-http, NAME-sse
	servers []string // the mcpstream server names, stdio first
	direct  *client.Client
	// protocol is the version the direct client negotiated: its raw requests carry the
	// 2026-07-28 _meta when it is that version.
	protocol string
	control  []string // control files of the demo instances (direct's last)
	// shapeOnly are tools whose results are compared by shape only.
	shapeOnly map[string]bool
}

func TestTransportDifferential(t *testing.T) {
	everything := npmServer(t, "server-everything")
	dir := t.TempDir()
	evHTTP := startEverythingHTTP(t, everything, "streamableHttp")
	evSSE := startEverythingHTTP(t, everything, "sse")

	var extra []registrysync.ServerConfig
	var families []*transportFamily
	add := func(sc registrysync.ServerConfig) { extra = append(extra, sc) }
	ev := &transportFamily{name: "ev", servers: []string{"ev-stdio", "ev-http", "ev-sse"},
		shapeOnly: map[string]bool{"get-env": true}}
	add(registrysync.ServerConfig{Name: "ev-stdio", Transport: registrysync.TransportStdio, Command: "node", Args: []string{everything, "stdio"}, CallTimeout: 20 * time.Second})
	add(registrysync.ServerConfig{Name: "ev-http", Transport: registrysync.TransportHTTP, URL: evHTTP + "/mcp", CallTimeout: 20 * time.Second})
	add(registrysync.ServerConfig{Name: "ev-sse", Transport: registrysync.TransportSSE, URL: evSSE + "/sse", CallTimeout: 20 * time.Second})
	families = append(families, ev)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	for _, demo := range []string{"ticketing", "kb", "logging"} {
		f := &transportFamily{name: demo, servers: []string{demo + "-stdio", demo + "-http", demo + "-sse"}}
		for i := range 4 {
			f.control = append(f.control, filepath.Join(dir, fmt.Sprintf("%s.%d.control.json", demo, i)))
		}
		sc, _ := serverConfig(t, dir, demo)
		sc.Name = demo + "-stdio"
		sc.Env["MCPSTREAM_TEST_CONTROL"] = f.control[0]
		add(sc)
		add(registrysync.ServerConfig{Name: demo + "-http", Transport: registrysync.TransportHTTP, URL: serveDemoHTTP(t, demo, f.control[1]) + "/mcp", Kinds: []string{"tools"}, CallTimeout: 20 * time.Second})
		add(registrysync.ServerConfig{Name: demo + "-sse", Transport: registrysync.TransportSSE, URL: serveDemoHTTP(t, demo, f.control[2]) + "/sse", Kinds: []string{"tools"}, CallTimeout: 20 * time.Second})
		families = append(families, f)
	}

	tf := &transportFamily{name: "tf", servers: []string{"tf-stdio", "tf-http", "tf-sse"}}
	add(registrysync.ServerConfig{Name: "tf-stdio", Transport: registrysync.TransportStdio, Command: exe,
		Env: map[string]string{childEnv: "transport", "GORACE": gorace}, Kinds: []string{"tools"}, CallTimeout: 20 * time.Second})
	for _, h := range []struct {
		name, path string
		handler    http.Handler
	}{
		{"tf-http", "/mcp", server.NewStreamableHTTPServer(newTransportFixture())},
		{"tf-sse", "/sse", server.NewSSEServer(newTransportFixture())},
	} {
		hs := httptest.NewServer(h.handler)
		t.Cleanup(hs.Close)
		transport := registrysync.TransportHTTP
		if h.path == "/sse" {
			transport = registrysync.TransportSSE
		}
		add(registrysync.ServerConfig{Name: h.name, Transport: transport, URL: hs.URL + h.path, Kinds: []string{"tools"}, CallTimeout: 20 * time.Second})
	}
	families = append(families, tf)

	// Direct mcp-go clients, over stdio, to instances of their own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitLimit)
	defer cancel()
	startDirect := func(f *transportFamily, command string, env []string, args ...string) {
		c, err := client.NewStdioMCPClient(command, env, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		init := mcp.InitializeRequest{}
		init.Params.ClientInfo = mcp.Implementation{Name: "direct", Version: "1"}
		res, err := c.Initialize(ctx, init) // negotiates as the connector does (2026-07-28 first)
		if err != nil {
			t.Fatalf("%s: direct initialize: %v", f.name, err)
		}
		f.direct, f.protocol = c, res.ProtocolVersion
	}
	startDirect(ev, "node", nil, everything, "stdio")
	startDirect(tf, exe, []string{childEnv + "=transport", "GORACE=" + gorace})
	for _, f := range families[1:4] {
		startDirect(f, exe, []string{childEnv + "=demo:" + f.name, "MCPSTREAM_TEST_CONTROL=" + f.control[3], "GORACE=" + gorace})
	}

	r := startRig(t, rigOptions{servers: []string{}, extra: extra})
	first := map[string]string{"tf": "sized", "ev": "echo", "ticketing": "createIssue", "kb": "search_knowledge_base", "logging": "getLogs"}
	for _, f := range families {
		for _, s := range f.servers {
			waitNPMReady(r, subjects.PublicName(s, first[f.name]))
		}
	}

	seed0, nseeds := envSeeds("MCPSTREAM_TRANSPORT", 2)
	long := os.Getenv("MCPSTREAM_TRANSPORT_SEEDS") != "" // a long run: the slow tools too
	if os.Getenv("MCPSTREAM_TRANSPORT_SEED0") == "" {
		seed0 = transportSeed
	}
	t.Logf("seeds %d..%d (MCPSTREAM_TRANSPORT_SEED0, MCPSTREAM_TRANSPORT_SEEDS; set, server-everything's simulate-research-query too)", seed0, seed0+uint64(nseeds)-1)

	cases := 0
	for _, f := range families {
		snaps := compareCatalogs(t, r, f)
		tools := snaps[0]
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range tools {
				if !yield(n) {
					return
				}
			}
		})
		// The direct client lists the same names.
		dl, err := f.direct.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("%s: direct tools/list: %v", f.name, err)
		}
		var dnames []string
		for _, tl := range dl.Tools {
			dnames = append(dnames, tl.Name)
		}
		slices.Sort(dnames)
		t.Logf("%s: %d tools %v", f.name, len(names), names)
		if !slices.Equal(dnames, names) {
			t.Errorf("%s: direct client lists %v, mcpstream %v", f.name, dnames, names)
		}
		for seed := seed0; seed < seed0+uint64(nseeds); seed++ {
			rng := rand.New(rand.NewPCG(seed, 0x7a5))
			for _, tool := range names {
				var def struct {
					InputSchema map[string]any `json:"inputSchema"`
					Execution   struct {
						TaskSupport string `json:"taskSupport"`
					} `json:"execution"`
				}
				if err := json.Unmarshal(tools[tool], &def); err != nil {
					t.Fatalf("%s %s: %v", f.name, tool, err)
				}
				if f.name == "ev" && tool == "simulate-research-query" && (seed != seed0 || !long) {
					continue // 4 s a call (its task's stages): one seed, in long runs only
				}
				args := genArguments(rng, f.name, tool, def.InputSchema)
				start := time.Now()
				// A tool that requires a task is run as one by the connector; a plain
				// tools/call of it is refused by the server: no direct call to compare.
				compareCall(t, r, f, tool, fmt.Sprintf("s%d-%s", seed, tool), args, def.Execution.TaskSupport != "required")
				if d := time.Since(start); d > time.Second {
					t.Logf("slow: %s %s %v", f.name, tool, d)
				}
				cases++
			}
		}
	}
	t.Logf("%d calls compared over %d transports and the direct client", cases, 3)

	// A call past its deadline is timeout on every transport, and the session goes on.
	for _, s := range tf.servers {
		res := r.call("local", subjects.PublicName(s, "slow"), `{"ms":5000}`, func(q *subjects.CallRequest) { q.ID, q.TimeoutMs = "late-"+s, 300 })
		if res.Error == nil || res.Error.Code != subjects.CodeTimeout {
			t.Errorf("%s: slow past its deadline: %s %+v", s, res.Status, res.Error)
		}
	}
	compareCall(t, r, tf, "slow", "after-late", `{"ms":1}`, true)
	compareCall(t, r, tf, "echo_args", "after-late-echo", `{"s":"still there"}`, true)

	// list_changed: hiding a tool through each demo instance's control file gives the same
	// new list over every transport; a call to it is refused alike.
	for _, f := range families[1:4] {
		hidden := first[f.name]
		extra, err := demoservers.ExtraTools(f.name)
		if err != nil {
			t.Fatal(err)
		}
		control, _ := json.Marshal(map[string][]string{"hide": {hidden}, "add": extra})
		for _, c := range f.control {
			if err := os.WriteFile(c, control, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range f.servers {
			waitFor(t, s+" lists "+string(control), func() bool {
				names := listedNames(t, r, s)
				for _, e := range extra {
					if !names[e] {
						return false
					}
				}
				return !names[hidden]
			})
		}
		// The direct client's instance lists the same (once it polled its control file).
		want := slices.Sorted(maps.Keys(listedNames(t, r, f.servers[0])))
		waitFor(t, f.name+": the direct client lists "+strings.Join(want, ","), func() bool {
			dl, err := f.direct.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var dnames []string
			for _, tl := range dl.Tools {
				dnames = append(dnames, tl.Name)
			}
			slices.Sort(dnames)
			return slices.Equal(dnames, want)
		})
		for _, e := range extra {
			compareCall(t, r, f, e, "added-"+e, `{}`, true)
		}
		compareCatalogs(t, r, f)
		var got []string
		for _, s := range f.servers {
			res := r.call("local", subjects.PublicName(s, hidden), `{}`)
			code := ""
			if res.Error != nil {
				code = res.Error.Code
			}
			got = append(got, res.Status+"/"+code)
		}
		if got[0] != got[1] || got[0] != got[2] {
			t.Errorf("%s: hidden tool %s answered %v over stdio, http, sse", f.name, hidden, got)
		}
	}
}

// listedNames are the tool names of a server's last tools snapshot.
func listedNames(t *testing.T, r *rig, server string) map[string]bool {
	out := map[string]bool{}
	for n := range lastToolSnapshot(t, r, server).items {
		out[n] = true
	}
	return out
}

type toolSnapshot struct {
	fingerprint string
	items       map[string]json.RawMessage
	rejected    []subjects.Rejected
	ttl         *int64
	scope       string
}

func lastToolSnapshot(t *testing.T, r *rig, server string) toolSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	stream, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, subjects.RegistrySnapshot(server, subjects.KindTools))
	if err != nil {
		t.Fatalf("%s: last tools snapshot: %v", server, err)
	}
	var snap subjects.Snapshot
	if err := json.Unmarshal(m.Data, &snap); err != nil {
		t.Fatal(err)
	}
	out := toolSnapshot{fingerprint: snap.Fingerprint, items: map[string]json.RawMessage{}, rejected: snap.Rejected, ttl: snap.TTLMs, scope: snap.CacheScope}
	for _, it := range snap.Items {
		var def struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(it, &def); err != nil {
			t.Fatal(err)
		}
		out.items[def.Name] = it
	}
	return out
}

// compareCatalogs compares the family's last tools snapshots over each transport: the raw
// definitions byte for byte, the fingerprint, the rejections; and that the executor holds
// every tool under its namespaced name with the listed inputSchema.
func compareCatalogs(t *testing.T, r *rig, f *transportFamily) []map[string]json.RawMessage {
	t.Helper()
	var snaps []toolSnapshot
	for _, s := range f.servers {
		snaps = append(snaps, lastToolSnapshot(t, r, s))
	}
	for i, s := range snaps[1:] {
		server := f.servers[i+1]
		if s.fingerprint != snaps[0].fingerprint {
			t.Errorf("%s: fingerprint %s, %s over stdio", server, s.fingerprint, snaps[0].fingerprint)
		}
		if fmt.Sprint(s.rejected) != fmt.Sprint(snaps[0].rejected) || ttlString(s.ttl) != ttlString(snaps[0].ttl) || s.scope != snaps[0].scope {
			t.Errorf("%s: rejected %v ttl %v scope %q; over stdio %v %v %q", server, s.rejected, ttlString(s.ttl), s.scope, snaps[0].rejected, ttlString(snaps[0].ttl), snaps[0].scope)
		}
		for name, def := range snaps[0].items {
			if got, ok := s.items[name]; !ok {
				t.Errorf("%s: %s not listed (listed over stdio)", server, name)
			} else if !bytes.Equal(got, def) {
				t.Errorf("%s: %s listed as\n%s\nover stdio as\n%s", server, name, got, def)
			}
		}
		for name := range s.items {
			if _, ok := snaps[0].items[name]; !ok {
				t.Errorf("%s: %s listed, not over stdio", server, name)
			}
		}
	}
	var out []map[string]json.RawMessage
	for i, s := range snaps {
		for name := range s.items {
			public := subjects.PublicName(f.servers[i], name)
			r.waitTool(public)
			tl := r.ex.reg.lookup(public)
			if tl.Name != name || tl.Server != f.servers[i] {
				t.Errorf("%s: executor holds %s/%s", public, tl.Server, tl.Name)
			}
		}
		out = append(out, s.items)
	}
	return out
}

func ttlString(ttl *int64) string {
	if ttl == nil {
		return "none"
	}
	return strconv.FormatInt(*ttl, 10)
}

// transportOutcome is one answer reduced to what must agree.
type transportOutcome struct {
	Status  string
	Code    string
	Message string
	Result  string // canonical, normalised
}

// compareCall calls tool with args over every transport through the executor and through
// the direct client, and reports any disagreement.
func compareCall(t *testing.T, r *rig, f *transportFamily, tool, id, args string, direct bool) {
	t.Helper()
	var outs []transportOutcome
	for _, s := range f.servers {
		res := r.call("local", subjects.PublicName(s, tool), args, func(q *subjects.CallRequest) { q.ID = id + "-" + s })
		o := transportOutcome{Status: res.Status}
		if res.Error != nil {
			o.Code = res.Error.Code
			o.Message = strings.ReplaceAll(res.Error.Message, s, "SERVER")
		}
		if len(res.Result) > 0 {
			o.Result = normaliseResult(t, res.Result, f.shapeOnly[tool])
		}
		outs = append(outs, o)
	}
	if outs[0].Code == subjects.CodeResultTooLarge {
		// Legitimately worded apart: over HTTP an answer over what an event holds is refused by
		// the connector ("larger than an event can hold"), over stdio (a line may be 64 MiB)
		// by the executor's size check; the code is the same.
		for i := range outs {
			outs[i].Message = ""
		}
	}
	for i, o := range outs[1:] {
		if o != outs[0] {
			t.Errorf("%s(%s): over %s\n%+v\nover %s\n%+v", tool, args, f.servers[i+1], o, f.servers[0], outs[0])
		}
	}
	if !direct || outs[0].Code == subjects.CodeInvalidArguments || outs[0].Code == subjects.CodeBadRequest ||
		outs[0].Code == subjects.CodeResultTooLarge {
		// Refused before dispatch (the direct client would ask the server), or a result over
		// the executor's limit (the direct client takes it).
		return // refused before dispatch: the direct client would ask the server
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	params := map[string]any{"name": tool}
	if args != "" {
		params["arguments"] = json.RawMessage(args)
	}
	if mcp.IsModernProtocol(f.protocol) {
		params["_meta"] = map[string]any{mcp.MetaKeyProtocolVersion: f.protocol, mcp.MetaKeyClientCapabilities: map[string]any{},
			mcp.MetaKeyClientInfo: mcp.Implementation{Name: "direct", Version: "1"}}
	}
	resp, err := f.direct.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: "tools/call", Params: params})
	if err != nil {
		t.Errorf("%s(%s): direct call: %v", tool, args, err)
		return
	}
	switch {
	case resp.Error != nil:
		// (The executor cuts the server's message to 1 KiB.)
		want := fmt.Sprintf("server answered JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)
		if outs[0].Status == subjects.CallOK || outs[0].Code != subjects.CodeProtocolError || !strings.HasPrefix(want, strings.TrimSuffix(outs[0].Message, "…")) {
			t.Errorf("%s(%s): direct call's error %d %q; executor %+v", tool, args, resp.Error.Code, resp.Error.Message, outs[0])
		}
	default:
		d := normaliseResult(t, resp.Result, f.shapeOnly[tool])
		if outs[0].Status != subjects.CallOK || d != outs[0].Result {
			t.Errorf("%s(%s): direct call's result\n%s\nexecutor's\n%+v", tool, args, d, outs[0])
		}
	}
}

// timestampRE matches the times results tell: RFC 3339 (ticketing, logging) and
// server-everything's resources' "created at 2:42:41 PM".
var timestampRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})|\d{1,2}:\d{2}:\d{2} [AP]M`)

// normaliseResult canonicalises a raw result (members sorted, numbers as written) with its
// timestamps replaced; shapeOnly replaces every string and number by its type.
func normaliseResult(t *testing.T, raw json.RawMessage, shapeOnly bool) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "not JSON: " + string(raw)
	}
	v = normaliseValue(v, "")
	if shapeOnly {
		v = shapeOf(v)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return timestampRE.ReplaceAllString(strings.TrimSpace(b.String()), "TIME")
}

// sessionRE matches server-everything's "session ID" in its toggle tools' text: "undefined"
// over stdio (no session), the HTTP session's UUID otherwise.
var sessionRE = regexp.MustCompile(`session (undefined|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// normaliseValue replaces what legitimately differs between instances: epoch timestamps
// (members named like "timestamp": logging's), task IDs (random), session IDs.
func normaliseValue(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normaliseValue(x, k)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = normaliseValue(x, key)
		}
		return v
	case json.Number:
		if strings.Contains(strings.ToLower(key), "timestamp") {
			return "TIME"
		}
	case string:
		if key == "taskId" {
			return "TASK"
		}
		return sessionRE.ReplaceAllString(v, "session SESSION")
	}
	return v
}

func shapeOf(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = shapeOf(x)
		}
		return out
	case []any:
		out := make([]any, 0, 1)
		if len(v) > 0 {
			out = append(out, shapeOf(v[0]))
		}
		return out
	case string:
		return "string"
	case json.Number:
		return "number"
	default:
		return v
	}
}

// Edge values the generator draws from, as raw JSON.
var (
	edgeStrings = []string{`""`, `"plain"`, `"ü \u2028 <&> 😀 \"q\" \\ /"`, `"` + "\u2028\u2029\u00a0\ufeff" + `"`,
		`"\u0000\u001f\u007f"`, `"\ud83d\ude00"`, `"\ud800"`, `"` + strings.Repeat("x", 3000) + `"`,
		`"line\nbreak\ttab"`, `"日本語テキスト"`, `"-1"`, `"1e3"`, `"null"`, `" "`}
	edgeNumbers  = []string{`0`, `-0`, `1`, `-1`, `1.5`, `1e308`, `-1e308`, `9007199254740993`, `123456789012345678901234567890`, `1E-7`, `2.0`, `5e-324`}
	edgeIntegers = []string{`0`, `1`, `-1`, `7`, `100`, `9007199254740993`, `2147483648`, `1.0`, `1e2`}
	wrongValues  = []string{`null`, `true`, `"x"`, `1`, `[]`, `{}`, `[1,"a",null]`, `{"nested":{"deep":[{}]}}`}
)

// genArguments returns a tools/call arguments object (raw JSON) for a tool's inputSchema:
// mostly valid, with edge values; sometimes missing a required member, with a member of the
// wrong type, or with an extra member; now and then not an object at all.
func genArguments(rng *rand.Rand, family, tool string, schema map[string]any) string {
	switch family + "/" + tool {
	case "ev/trigger-long-running-operation", "tf/sized", "tf/slow":
	default:
		switch rng.IntN(20) {
		case 0:
			return `[]`
		case 1:
			return ``
		case 2:
			return `{}`
		}
	}
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range props {
			if !yield(n) {
				return
			}
		}
	})
	var members []string
	for _, n := range names {
		ps, _ := props[n].(map[string]any)
		if !required[n] && rng.IntN(3) == 0 {
			continue // optional member left out
		}
		if required[n] && rng.IntN(12) == 0 {
			continue // required member missing
		}
		v := genValue(rng, ps, 0)
		if rng.IntN(12) == 0 {
			v = wrongValues[rng.IntN(len(wrongValues))]
		}
		members = append(members, strconv.Quote(n)+":"+v)
	}
	if rng.IntN(8) == 0 {
		members = append(members, `"extra_\u00e9":`+wrongValues[rng.IntN(len(wrongValues))])
	}
	// server-everything's tools that reach out or wait: kept local and short.
	switch family + "/" + tool {
	case "tf/slow":
		members = []string{`"ms":` + []string{`0`, `1`, `20`}[rng.IntN(3)]}
	case "tf/sized":
		// Around the connector's event reads (32 KiB) and kept buffer (128 KiB), and the
		// executor's result limit (4 MiB, the result's JSON: its envelope and _meta on top).
		sizes := []int{0, 1, 32<<10 - 50, 32 << 10, 128<<10 - 45, 128<<10 + 3, 1 << 20, 4<<20 - 100}
		fills := []string{`"a"`, `"ü"`, `"😀"`, `"\u2028"`, `"<&>"`}
		members = []string{`"n":` + strconv.Itoa(sizes[rng.IntN(len(sizes))]), `"fill":` + fills[rng.IntN(len(fills))]}
	case "ev/gzip-file-as-resource":
		members = slices.DeleteFunc(members, func(m string) bool { return strings.HasPrefix(m, `"data":`) })
		members = append(members, `"data":`+[]string{`"data:text/plain;base64,aGVsbG8="`, `"data:,x"`, `"not a url"`, `"file:///etc/passwd"`}[rng.IntN(4)])
	case "ev/trigger-long-running-operation":
		members = []string{`"duration":` + []string{`0`, `0.05`, `0.1`}[rng.IntN(3)], `"steps":` + []string{`1`, `2`, `3`}[rng.IntN(3)]}
	}
	return "{" + strings.Join(members, ",") + "}"
}

func genValue(rng *rand.Rand, s map[string]any, depth int) string {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		if rng.IntN(6) == 0 {
			return `"not-in-enum"`
		}
		b, _ := json.Marshal(enum[rng.IntN(len(enum))])
		return string(b)
	}
	if c, ok := s["const"]; ok {
		b, _ := json.Marshal(c)
		return string(b)
	}
	if alts, ok := s["anyOf"].([]any); ok && len(alts) > 0 {
		a, _ := alts[rng.IntN(len(alts))].(map[string]any)
		return genValue(rng, a, depth)
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[rng.IntN(len(ts))].(string)
	}
	switch typ {
	case "string":
		if min, ok := s["minLength"].(float64); ok && min > 0 && rng.IntN(2) == 0 {
			return `"` + strings.Repeat("m", int(min)) + `"`
		}
		if d, ok := s["default"].(string); ok && rng.IntN(3) == 0 {
			return strconv.Quote(d)
		}
		return edgeStrings[rng.IntN(len(edgeStrings))]
	case "number":
		return edgeNumbers[rng.IntN(len(edgeNumbers))]
	case "integer":
		if rng.IntN(2) == 0 {
			lo, hi := 0.0, 20.0
			if m, ok := s["minimum"].(float64); ok {
				lo = m
			}
			if m, ok := s["maximum"].(float64); ok && m < lo+20 {
				hi = m - lo
			}
			return strconv.Itoa(int(lo) + rng.IntN(int(hi)+1))
		}
		return edgeIntegers[rng.IntN(len(edgeIntegers))]
	case "boolean":
		return []string{`true`, `false`}[rng.IntN(2)]
	case "null":
		return `null`
	case "array":
		items, _ := s["items"].(map[string]any)
		n := rng.IntN(4)
		var vs []string
		for range n {
			vs = append(vs, genValue(rng, items, depth+1))
		}
		return "[" + strings.Join(vs, ",") + "]"
	case "object":
		if depth > 3 {
			return `{}`
		}
		props, _ := s["properties"].(map[string]any)
		var ms []string
		for _, n := range slices.Sorted(func(yield func(string) bool) {
			for n := range props {
				if !yield(n) {
					return
				}
			}
		}) {
			ps, _ := props[n].(map[string]any)
			ms = append(ms, strconv.Quote(n)+":"+genValue(rng, ps, depth+1))
		}
		if len(props) == 0 {
			ms = append(ms, `"k":{"nested":[1,{"u":"ü"}]}`)
		}
		return "{" + strings.Join(ms, ",") + "}"
	}
	return wrongValues[rng.IntN(len(wrongValues))]
}

// newTransportFixture is an mcp-go server whose tools exercise what a transport carries
// differently: results of chosen sizes (around the SSE reader's buffers and the executor's
// result limit), notifications sent before the answer (interleaved on stdout, events of the
// POST's stream over HTTP), a JSON-RPC error, the arguments echoed back raw.
func newTransportFixture() *server.MCPServer {
	srv := server.NewMCPServer("transport", "1.0.0", server.WithToolCapabilities(true), server.WithRecovery(), server.WithLogging())
	srv.AddTool(mcp.NewTool("sized", mcp.WithDescription("A text result of n bytes."),
		mcp.WithNumber("n", mcp.Required(), mcp.Min(0), mcp.Max(6<<20)), mcp.WithString("fill"), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n, fill := int(req.GetFloat("n", 0)), req.GetString("fill", "a")
			if fill == "" {
				fill = "a"
			}
			return mcp.NewToolResultText(strings.Repeat(fill, n/len(fill)+1)[:n]), nil
		})
	srv.AddTool(mcp.NewTool("notify", mcp.WithDescription("Sends count log notifications, then answers."),
		mcp.WithNumber("count", mcp.Min(0), mcp.Max(50)), mcp.WithString("text"), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count, text := int(req.GetFloat("count", 3)), req.GetString("text", "note")
			for i := range count {
				_ = srv.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": fmt.Sprintf("%s %d", text, i)})
				_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": "p", "progress": i})
			}
			return mcp.NewToolResultStructured(map[string]any{"sent": count, "text": text}, fmt.Sprintf("sent %d: %s", count, text)), nil
		})
	srv.AddTool(mcp.NewTool("slow", mcp.WithDescription("Answers after ms milliseconds, or when cancelled."),
		mcp.WithNumber("ms", mcp.Min(0), mcp.Max(10_000)), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
				return mcp.NewToolResultText("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	srv.AddTool(mcp.NewTool("rpc_error", mcp.WithDescription("Fails with a JSON-RPC error."), mcp.WithString("why"), hints(true, false, true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("refused: %s", req.GetString("why", "no reason"))
		})
	srv.AddTool(mcp.NewToolWithRawSchema("echo_args", "Echoes its arguments.", json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"},"n":{"type":"number"},"o":{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}},"i":{"type":"integer"}}},"b":{"type":"boolean"}}}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, _ := json.Marshal(req.GetRawArguments())
			return mcp.NewToolResultStructured(json.RawMessage(raw), string(raw)), nil
		})
	return srv
}
