package registrysync

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
	"github.com/mcpstream/mcpstream/testdeps"
)

// Real MCP servers from npm, pinned in testdeps/package.json and installed by
// `npm ci --prefix testdeps`.

// npmServer returns the entry point of an installed npm MCP server (testdeps.NPMServer).
func npmServer(t *testing.T, pkg string) string { return testdeps.NPMServer(t, pkg) }

// server-everything over stdio speaks 2025-11-25: tools, prompts and resources are listed,
// and the tools/list_changed it sends right after initialization leads to a ListChanged event
// and a snapshot after it.
func TestNPMEverythingStdio(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "server-everything")
	sc := ServerConfig{Name: "everything", Transport: TransportStdio, Command: "node", Args: []string{entry, "stdio"}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("everything"))

	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if ready.ev.Status.Protocol != "2025-11-25" {
		t.Errorf("protocol = %q", ready.ev.Status.Protocol)
	}
	changed := rec.wait(0, "tools list_changed", isChanged(subjects.KindTools))
	snap := rec.wait(changed.seq, "tools snapshot after list_changed", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if !hasName(t, snap, "echo") || len(snap.Rejected) != 0 {
		t.Errorf("tools = %v, rejected = %+v", names(t, snap), snap.Rejected)
	}
	for _, k := range []subjects.Kind{subjects.KindPrompts, subjects.KindResources} {
		s := rec.wait(0, string(k), isSnapshot(k, nil)).ev.Snapshot
		if len(s.Items) == 0 {
			t.Errorf("no %s", k)
		}
	}
	r := dispatch(t, h, "everything", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if r.Error != nil || !strings.Contains(resultText(t, r.Result), "hi") {
		t.Errorf("echo: %+v %s", r.Error, r.Result)
	}
	// The TypeScript SDK answers an unknown tool with an isError result, not a JSON-RPC error.
	r = dispatch(t, h, "everything", subjects.DispatchRequest{V: 1, Tool: "no_such_tool"})
	if r.Error == nil && !strings.Contains(string(r.Result), `"isError":true`) {
		t.Errorf("unknown tool: %s", r.Result)
	}
}

// server-everything over streamable HTTP is legacy: the connector reconnects with the GET
// stream and stays ready.
func TestNPMEverythingStreamableHTTP(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "server-everything")
	port := freePort(t)
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	startProcess(t, cmd)

	sc := ServerConfig{Name: "everything-http", Transport: TransportHTTP, URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("everything-http"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if ready.ev.Status.Protocol != "2025-11-25" {
		t.Errorf("protocol = %q", ready.ev.Status.Protocol)
	}
	snap := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if !hasName(t, snap, "echo") {
		t.Errorf("tools = %v", names(t, snap))
	}
	r := dispatch(t, h, "everything-http", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"message":"over http"}`)})
	if r.Error != nil || !strings.Contains(resultText(t, r.Result), "over http") {
		t.Errorf("echo: %+v %s", r.Error, r.Result)
	}
	// Re-listing after the conditional tools were registered stores nothing new or one
	// snapshot; either way the reply names the current fingerprint.
	rr := relist(t, h, "everything-http", subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
	if rr.Error != nil || rr.Fingerprint == "" {
		t.Errorf("relist: %+v", rr)
	}
}

// server-everything over legacy HTTP+SSE: its endpoint event is relative
// ("/message?sessionId=..."), which the endpoint's origin check resolves against the SSE URL.
func TestNPMEverythingSSE(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "server-everything")
	port := freePort(t)
	cmd := exec.Command("node", entry, "sse")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	startProcess(t, cmd)

	sc := ServerConfig{Name: "everything-sse", Transport: TransportSSE, URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/sse"}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("everything-sse"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	snap := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if !hasName(t, snap, "echo") {
		t.Errorf("tools = %v", names(t, snap))
	}
	r := dispatch(t, h, "everything-sse", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"message":"over sse"}`)})
	if r.Error != nil || !strings.Contains(resultText(t, r.Result), "over sse") {
		t.Errorf("echo: %+v %s", r.Error, r.Result)
	}
}

// server-filesystem on a temporary directory: its tools are listed and list_directory works.
func TestNPMFilesystem(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "server-filesystem")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := ServerConfig{Name: "fs", Transport: TransportStdio, Command: "node", Args: []string{entry, dir}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("fs"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	snap := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if !hasName(t, snap, "list_directory") || len(snap.Rejected) != 0 {
		t.Fatalf("tools = %v, rejected = %+v", names(t, snap), snap.Rejected)
	}
	args, _ := json.Marshal(map[string]string{"path": dir})
	r := dispatch(t, h, "fs", subjects.DispatchRequest{V: 1, Tool: "list_directory", Arguments: args})
	if r.Error != nil || !strings.Contains(resultText(t, r.Result), "hello.txt") {
		t.Errorf("list_directory: %+v %s", r.Error, r.Result)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess starts cmd and kills that process (by its pid) at cleanup.
func startProcess(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("process %d did not exit", cmd.Process.Pid)
		}
	})
}
