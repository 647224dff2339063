package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/liveness"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// scaleTool is a tool of a scale test's server that answers "<server>/<tool>".
func scaleTool(srv, name string) server.ServerTool {
	return server.ServerTool{
		Tool: mcp.NewTool(name, mcp.WithDescription("Tool "+name+" of "+srv+"."), hints(true, false, true)),
		Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(srv + "/" + name), nil
		},
	}
}

// openFDs counts this process's open file descriptors (-1 where /proc is not there).
func openFDs() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}

// TestManyServersOneRegistrysync: one registrysync running many servers at once (120 streamable
// HTTP servers on one listener, 3 stdio demo servers), with a catalog replica, a liveness
// watchdog and an executor on the same NATS. Every server gets ready and all its tools are in the
// catalog (the servers listing, paged, names each server once, sorted) and callable; a
// list_changed from every HTTP server at once (one tool removed, one added) converges: the
// catalog holds every new list, the executor serves the new tools and refuses the removed ones;
// once the registrysync stops, its goroutines and file descriptors are given back. Measured on 2
// cores under -race: 1,004 servers ready in 34-52 s, 16 goroutines per HTTP server (both ends),
// none left after the stop.
func TestManyServersOneRegistrysync(t *testing.T) {
	const n = 120
	env := startNATS(t, natsembed.Config{})
	cat, err := indexer.Open(indexer.Config{InMemory: true, Log: testLogger(t).With().Str("role", "indexer").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	errc := make(chan error, 3)
	wd := &liveness.Watchdog{NC: env.NC, JS: env.JS, Log: testLogger(t)}
	go func() { errc <- cat.Follow(cctx, env.JS) }()
	go func() { errc <- cat.Serve(cctx, env.NC) }()
	go func() { errc <- wd.Run(cctx) }()
	t.Cleanup(func() {
		ccancel()
		for range 3 {
			if err := <-errc; err != nil {
				t.Errorf("indexer: %v", err)
			}
		}
		cat.Close()
	})
	r := &rig{t: t, env: env, control: map[string]string{}, dir: t.TempDir(), client: Client{NC: env.NC, JS: env.JS}}
	r.startExecutor(Config{}, env.NC) // dispatching over NATS
	cl := indexer.Client{NC: env.NC, Timeout: waitLimit}
	g0, fd0 := runtime.NumGoroutine(), openFDs()

	mux := http.NewServeMux()
	srvs := make([]*server.MCPServer, n)
	var names []string
	for i := range n {
		name := fmt.Sprintf("h%04d", i)
		s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(true),
			server.WithMethodCacheHints(mcp.MethodToolsList, 600_000, mcp.CacheScopePublic))
		s.SetTools(scaleTool(name, "echo"), scaleTool(name, "gone"))
		srvs[i] = s
		mux.Handle("/"+name+"/mcp", server.NewStreamableHTTPServer(s))
		names = append(names, name)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	var scs []registrysync.ServerConfig
	for _, name := range names {
		scs = append(scs, registrysync.ServerConfig{Name: name, Transport: registrysync.TransportHTTP, URL: ts.URL + "/" + name + "/mcp"})
	}
	for _, demo := range []string{"ticketing", "logging", "kb"} {
		sc, _ := serverConfig(t, r.dir, demo)
		sc.Name = "stdio-" + demo
		scs = append(scs, sc)
		names = append(names, sc.Name)
	}
	slices.Sort(names)
	mgr := registrysync.New(env.JS, env.NC, registrysync.Config{Servers: scs, HeartbeatEvery: time.Second, ResyncEvery: -1, PingEvery: -1, DrainTimeout: 2 * time.Second},
		testLogger(t).With().Str("role", "registrysync").Logger())
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- mgr.Run(mctx) }()
	stopMgr := func() {
		mcancel()
		select {
		case err := <-mdone:
			if err != nil {
				t.Errorf("registrysync: %v", err)
			}
			mdone <- nil
		case <-time.After(waitLimit):
			t.Fatal("registrysync did not stop")
		}
	}
	t.Cleanup(stopMgr)

	// converged reports, with why not, whether the catalog's servers listing (paged) names every
	// server once, in order, ready, each HTTP server with tools (and the stdio ones with some).
	converged := func(tools []string) (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		rep, err := cl.AllServers(ctx, "local", subjects.ServersRequest{V: 1, Limit: 37}, 100)
		if err != nil || rep.Error != nil || rep.Next != "" {
			return false, fmt.Sprintf("servers: %v %v next %q", err, rep.Error, rep.Next)
		}
		got := make([]string, 0, len(rep.Servers))
		for _, s := range rep.Servers {
			got = append(got, s.Name)
			want := len(tools)
			if s.Name[0] != 'h' {
				want = s.Tools // (whatever the demo server has)
			}
			if s.Status != subjects.StatusReady || s.Tools == 0 || s.Tools != want {
				return false, fmt.Sprintf("%s: %s, %d tools", s.Name, s.Status, s.Tools)
			}
		}
		if !slices.Equal(got, names) {
			return false, fmt.Sprintf("servers listed: %d of %d, or not in order", len(got), len(names))
		}
		var pubs []string
		for i := range n {
			for _, tool := range tools {
				pubs = append(pubs, subjects.PublicName(fmt.Sprintf("h%04d", i), tool))
			}
		}
		for chunk := range slices.Chunk(pubs, indexer.MaxDetailNames) {
			rep, err := cl.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: chunk, Principal: subjects.Principal{User: "local"}})
			if err != nil || rep.Error != nil || len(rep.Tools) != len(chunk) {
				return false, fmt.Sprintf("details: %v %+v, %d of %d", err, rep.Error, len(rep.Tools), len(chunk))
			}
		}
		return true, ""
	}
	waitConverged := func(what string, tools ...string) {
		t.Helper()
		var why string
		deadline := time.Now().Add(waitLimit)
		for ok := false; !ok; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not converged within %s: %s", what, waitLimit, why)
			}
			time.Sleep(50 * time.Millisecond)
			ok, why = converged(tools)
		}
	}
	// callAll calls tool on every HTTP server through the executor (16 at a time).
	callAll := func(tool string, want func(subjects.CallResult) bool) {
		t.Helper()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		var mu sync.Mutex
		var bad []string
		for i := range n {
			name := fmt.Sprintf("h%04d", i)
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: subjects.PublicName(name, tool),
					Principal: subjects.Principal{User: "local"}, Arguments: json.RawMessage(`{}`)})
				if err != nil || !want(res) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %v %+v %s", name, err, res.Error, res.Result))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Errorf("%s: %d of %d calls wrong, e.g. %v", tool, len(bad), n, bad[:min(5, len(bad))])
		}
	}
	answers := func(tool string) func(subjects.CallResult) bool {
		return func(res subjects.CallResult) bool {
			var out struct {
				Content []struct{ Text string } `json:"content"`
			}
			return res.Status == subjects.CallOK && json.Unmarshal(res.Result, &out) == nil && len(out.Content) == 1 &&
				len(out.Content[0].Text) > len(tool) && out.Content[0].Text[len(out.Content[0].Text)-len(tool):] == tool
		}
	}

	start := time.Now()
	waitConverged("start", "echo", "gone")
	t.Logf("%d servers ready, every tool in the catalog, after %s; %.1f goroutines per server (both ends)",
		len(names), time.Since(start).Round(time.Millisecond), float64(runtime.NumGoroutine()-g0)/float64(len(names)))
	callAll("echo", answers("echo"))

	burst := time.Now()
	for i, s := range srvs { // a list_changed from every server at once
		name := fmt.Sprintf("h%04d", i)
		s.SetTools(scaleTool(name, "echo"), scaleTool(name, "fresh"))
	}
	waitConverged("after a list_changed from every server", "echo", "fresh")
	t.Logf("converged after the burst in %s; connector_lost declarations: %d", time.Since(burst).Round(time.Millisecond), wd.Declared())
	callAll("fresh", answers("fresh"))
	callAll("gone", func(res subjects.CallResult) bool {
		return res.Status == subjects.CallRefused && res.Error != nil && (res.Error.Code == subjects.CodeStale || res.Error.Code == subjects.CodeNotFound)
	})

	// Stopped, the registrysync gives back what its servers held (the HTTP servers' ends too,
	// once closed).
	stopMgr()
	ts.Close()
	var g, fd int
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
		g, fd = runtime.NumGoroutine(), openFDs()
		if g <= g0+20 && fd <= fd0+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stop: %d goroutines (%d before the start), %d file descriptors (%d before)", g, g0, fd, fd0)
		}
	}
	t.Logf("after the stop: %d goroutines (%d before the start), %d file descriptors (%d before)", g, g0, fd, fd0)
}
