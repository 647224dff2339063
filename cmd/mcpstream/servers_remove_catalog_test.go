package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// `servers remove` of a server whose name needs encoding in a subject token: the catalog drops
// its tools from search, details and counts, a replica rebuilt from the stream too, and a name
// that only prefixes it is no server; removing it twice is no error.
func TestServersRemoveCatalog(t *testing.T) {
	const odd = "srv.a*> b"
	env := natstest.Start(t)
	for _, name := range []string{odd, "keep"} {
		publish(t, env.JS, subjects.RegistryStatus(name), status(name, subjects.StatusReady, t0))
		publish(t, env.JS, subjects.RegistrySnapshot(name, subjects.KindTools), snapshot(name, subjects.KindTools, t0, tools("lookup", "update")))
	}
	serveCatalog(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := indexer.Client{NC: env.NC, Timeout: 5 * time.Second}
	public := subjects.PublicName(odd, "lookup")

	if _, errOut, err := runCmd(t, ctx, "servers", "remove", "srv.a", "--nats", env.URL); exitStatus(err) != 1 || !strings.Contains(errOut, `no server "srv.a"`) {
		t.Errorf("remove of a prefix of a server name: %v %q", err, errOut)
	}
	out, errOut, err := runCmd(t, ctx, "servers", "remove", odd, "--nats", env.URL)
	if err != nil || out != "removed "+odd+"\n" {
		t.Fatalf("servers remove: %v\n%s%s", err, out, errOut)
	}
	check := func(when string) {
		t.Helper()
		rep, err := cl.AllServers(ctx, "local", subjects.ServersRequest{}, 0)
		if err != nil || rep.Error != nil {
			t.Fatalf("%s: servers: %v %+v", when, err, rep.Error)
		}
		for _, s := range rep.Servers {
			if s.Name == odd && (s.Status != subjects.StatusRemoved || s.Tools != 0) {
				t.Errorf("%s: catalog lists %+v", when, s)
			}
			if s.Name == "keep" && s.Tools != 2 {
				t.Errorf("%s: keep lost tools: %+v", when, s)
			}
		}
		sr, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "lookup", K: 10, IncludeUnavailable: true})
		if err != nil || sr.Error != nil {
			t.Fatalf("%s: search: %v %+v", when, err, sr.Error)
		}
		for _, ti := range sr.Tools {
			if ti.Server == odd {
				t.Errorf("%s: search finds %+v", when, ti)
			}
		}
		dr, err := cl.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: []string{public}})
		if err != nil {
			t.Fatalf("%s: details: %v", when, err)
		}
		if dr.Error == nil || dr.Error.Code != subjects.CodeNotFound || dr.Error.Reason != "removed" {
			t.Errorf("%s: details of a removed tool: %+v %+v", when, dr.Tools, dr.Error)
		}
	}
	waitFor(t, "the catalog drops the server", 500, func() bool {
		dr, err := cl.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: []string{public}})
		return err == nil && dr.Error != nil
	})
	check("after remove")
	// Removing it again succeeds and changes nothing.
	if _, errOut, err := runCmd(t, ctx, "servers", "remove", odd, "--nats", env.URL); err != nil {
		t.Errorf("remove twice: %v %q", err, errOut)
	}
	// A new replica rebuilds without it.
	serveCatalog(t, env)
	check("rebuilt")
	rows, _, err := readServers(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Name == odd && (r.Status != subjects.StatusRemoved || r.Tools != 0) {
			t.Errorf("servers lists %+v, want removed with no tools", r)
		}
	}
}
