package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestServersSkipsMalformedLastEvent: `servers` reads the last status and snapshot of each
// subject; when that last message was one consumers refuse (not JSON, or another server's
// payload), it showed the server "unknown" (a status no consumer has) with no tools, while every
// catalog replica, which skips such a message, kept showing the last valid status and list. It
// now falls back to the last valid event of that subject, as the catalog does; a subject with no
// valid event still adds no server.
func TestServersSkipsMalformedLastEvent(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publish(t, env.JS, subjects.RegistryStatus("kb"), status("kb", subjects.StatusConnecting, t0))
	publish(t, env.JS, subjects.RegistrySnapshot("kb", subjects.KindTools), snapshot("kb", subjects.KindTools, t0, tools("old_tool")))
	publish(t, env.JS, subjects.RegistrySnapshot("kb", subjects.KindTools), snapshot("kb", subjects.KindTools, t0.Add(time.Second), tools("search_knowledge_base", "get_document")))
	publish(t, env.JS, subjects.RegistryStatus("kb"), status("kb", subjects.StatusReady, t0.Add(time.Second)))
	// The last message of each kb subject is one the consumers refuse.
	publish(t, env.JS, subjects.RegistryStatus("kb"), []byte("not json"))
	publish(t, env.JS, subjects.RegistrySnapshot("kb", subjects.KindTools), snapshot("other", subjects.KindTools, t0.Add(2*time.Second), tools("x", "y", "z")))
	// A server with no valid event at all is not listed.
	publish(t, env.JS, subjects.RegistryStatus("ghost"), []byte("{"))

	cat, err := indexer.Open(indexer.Config{Dir: filepath.Join(t.TempDir(), "catalog")})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 2)
	go func() { errc <- cat.Follow(rctx, env.JS) }()
	go func() { errc <- cat.Serve(rctx, env.NC) }()
	defer func() {
		stop()
		for range 2 {
			if err := <-errc; err != nil {
				t.Errorf("indexer: %v", err)
			}
		}
		cat.Close()
	}()
	cl := indexer.Client{NC: env.NC, Timeout: time.Second}
	for i := 0; ; i++ {
		if cat.Seq() >= 7 {
			if _, err := cl.Servers(ctx, "local", subjects.ServersRequest{}); err == nil {
				break
			}
		}
		if i == 1000 {
			t.Fatal("catalog not serving after 1000 polls")
		}
		time.Sleep(10 * time.Millisecond)
	}

	type row struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Tools  int    `json:"tools"`
	}
	read := func(args ...string) []row {
		t.Helper()
		out, errOut, err := runCmd(t, ctx, append(args, "--json", "--nats", env.URL)...)
		if err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errOut)
		}
		var rows []row
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return rows
	}
	want := []row{{Name: "kb", Status: subjects.StatusReady, Tools: 2}}
	for _, args := range [][]string{{"servers", "--catalog"}, {"servers"}} {
		got := read(args...)
		if len(got) != len(want) || got[0] != want[0] {
			t.Errorf("%v: %+v, want %+v (the last valid status and snapshot)", args, got, want)
		}
	}
}
