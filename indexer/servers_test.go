package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// manyServers returns the events of n servers "s0000".."s<n-1>", each ready with one tool, and
// a description of descBytes bytes.
func manyServers(n, descBytes int) []any {
	var evs []any
	for i := range n {
		name := fmt.Sprintf("s%04d", i)
		evs = append(evs, status(name, subjects.StatusReady),
			snapshot(name, strings.Repeat("d", descBytes), tool("t", "a tool")))
	}
	return evs
}

// serversPages follows the pages of a servers listing over NATS (at most maxPages) and returns
// the servers, in order, and the number of pages.
func serversPages(t *testing.T, cl Client, tenant string, req subjects.ServersRequest, maxPages int) ([]subjects.ServerSummary, int) {
	t.Helper()
	var out []subjects.ServerSummary
	for page := 1; page <= maxPages; page++ {
		rep, err := cl.Servers(context.Background(), tenant, req)
		if err != nil {
			t.Fatalf("page %d (after %q): %v", page, req.After, err)
		}
		if rep.Error != nil {
			t.Fatalf("page %d (after %q): %s: %s", page, req.After, rep.Error.Code, rep.Error.Message)
		}
		out = append(out, rep.Servers...)
		if rep.Next == "" {
			return out, page
		}
		if len(rep.Servers) == 0 || rep.Next != rep.Servers[len(rep.Servers)-1].Name {
			t.Fatalf("page %d: next %q is not the last server of the page (%d servers)", page, rep.Next, len(rep.Servers))
		}
		req.After = rep.Next
	}
	t.Fatalf("more than %d pages", maxPages)
	return nil, 0
}

func summaryNames(ss []subjects.ServerSummary) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func serviceUp(t *testing.T, cl Client) {
	t.Helper()
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, Limit: 1})
		return err == nil
	})
}

// TestServersListingOfThousands: the servers listing was one reply with every server: with
// enough servers (here 300 with 400-byte descriptions, on a NATS server whose messages hold
// 64 KiB) it was larger than a NATS message and answered too_large, so nobody could list them.
// It comes in pages (100 servers by default), sorted by name, each with the name to ask the
// next page after; a page that would not fit in a message ends early.
func TestServersListingOfThousands(t *testing.T) {
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 64 << 10})
	const n = 300
	seq := publish(t, env.JS, manyServers(n, 400)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	serviceUp(t, cl)

	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("s%04d", i))
	}
	// A client that knows nothing of pages gets the first page, not an error.
	first, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1})
	if err != nil || first.Error != nil {
		t.Fatalf("servers: %v %+v", err, first.Error)
	}
	if len(first.Servers) == 0 || first.Next == "" {
		t.Fatalf("first page: %d servers, next %q; want a page and a next", len(first.Servers), first.Next)
	}
	for _, limit := range []int{0, 1, 7, 100, MaxServers} {
		got, pages := serversPages(t, cl, "local", subjects.ServersRequest{V: 1, Limit: limit}, n+1)
		if !slices.Equal(summaryNames(got), want) {
			t.Fatalf("limit %d: %d servers over %d pages, want the %d in order", limit, len(got), pages, n)
		}
		if limit == 1 && pages != n {
			t.Errorf("limit 1: %d pages, want %d", pages, n)
		}
		if limit == 0 && pages < n/DefaultServers {
			t.Errorf("limit 0: %d pages, want at least %d", pages, n/DefaultServers)
		}
		if limit == MaxServers && pages < 2 {
			t.Errorf("limit %d: %d pages; a page of %d servers of ~500 bytes cannot fit 64 KiB", limit, pages, n)
		}
	}
	// After any name, the servers sorting after it: a name that is no server's included.
	rep, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, After: "s0297x", Limit: 5})
	if err != nil || rep.Error != nil || !slices.Equal(summaryNames(rep.Servers), []string{"s0298", "s0299"}) || rep.Next != "" {
		t.Errorf("after s0297x: %v %+v %v next %q; want [s0298 s0299] and no next", err, rep.Error, summaryNames(rep.Servers), rep.Next)
	}
	rep, err = cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, After: "s0299"})
	if err != nil || rep.Error != nil || len(rep.Servers) != 0 || rep.Next != "" {
		t.Errorf("after the last: %v %+v %v next %q; want nothing", err, rep.Error, summaryNames(rep.Servers), rep.Next)
	}
	if st := r.Stats().Endpoints["servers"]; st.Errors != 0 {
		t.Errorf("servers endpoint errors %d, want none", st.Errors)
	}
}

// TestServersPagingBadRequests: out-of-range and garbage paging values are refused with a
// stable code and the member at fault.
func TestServersPagingBadRequests(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, manyServers(3, 10)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	serviceUp(t, Client{NC: nc})
	tests := []struct {
		name, body, code, path string
	}{
		{"negative limit", `{"v":1,"limit":-1}`, subjects.CodeBadRequest, "/limit"},
		{"limit past the maximum", fmt.Sprintf(`{"v":1,"limit":%d}`, MaxServers+1), subjects.CodeBadRequest, "/limit"},
		{"huge limit", `{"v":1,"limit":1e300}`, subjects.CodeBadRequest, ""},
		{"fractional limit", `{"v":1,"limit":1.5}`, subjects.CodeBadRequest, ""},
		{"limit as text", `{"v":1,"limit":"10"}`, subjects.CodeBadRequest, ""},
		{"after not a string", `{"v":1,"after":7}`, subjects.CodeBadRequest, ""},
		{"after too long", fmt.Sprintf(`{"v":1,"after":%q}`, strings.Repeat("a", MaxNameBytes+1)), subjects.CodeTooLarge, "/after"},
		{"limit twice", `{"v":1,"limit":1,"limit":1000}`, subjects.CodeBadRequest, ""},
		{"limit up to case", `{"v":1,"Limit":1}`, subjects.CodeBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := nc.Request(subjects.CatalogServers("local"), []byte(tt.body), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var rep subjects.ServersReply
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				t.Fatalf("reply %s: %v", msg.Data, err)
			}
			if rep.Error == nil || rep.Error.Code != tt.code || rep.Error.Path != tt.path {
				t.Fatalf("reply %s; want code %s, path %q", msg.Data, tt.code, tt.path)
			}
			if rep.Servers == nil || len(rep.Servers) != 0 || rep.Next != "" {
				t.Errorf("reply %s: servers or a next with an error", msg.Data)
			}
			if got := msg.Header.Get("Nats-Service-Error-Code"); got != tt.code {
				t.Errorf("error code header %q, want %q", got, tt.code)
			}
		})
	}
}

// TestServersPagingPermissions: a page holds only servers the principal may see, a server it
// may not see is never counted in a page's limit, and no next is given when only such servers
// remain.
func TestServersPagingPermissions(t *testing.T) {
	env := natstest.Start(t)
	evs := manyServers(10, 10)
	// s0010 lists privately for another user: no one else sees it.
	priv := snapshot("s0010", "private", tool("t", "a tool"))
	priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "user:bob"
	evs = append(evs, status("s0010", subjects.StatusReady), priv)
	seq := publish(t, env.JS, evs...)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Roles: []string{"dev"}}, "bob": {Roles: []string{"dev"}}},
		Rules: []policy.Rule{{Name: "dev", Roles: []string{"dev"},
			Allow: []string{"s0001__*", "s0004__*", "s0005__*", "s0008__*", "s0010__*"}}},
	})
	r := startReplica(t, env, "", pol, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: "alice"}})
		return err == nil
	})
	alice := subjects.Principal{User: "alice"}
	rep, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, Principal: alice, Limit: 2})
	if err != nil || rep.Error != nil {
		t.Fatalf("%v %+v", err, rep.Error)
	}
	if got := summaryNames(rep.Servers); !slices.Equal(got, []string{"s0001", "s0004"}) || rep.Next != "s0004" {
		t.Errorf("alice, first page of 2: %v next %q; want [s0001 s0004] next s0004", got, rep.Next)
	}
	// The last server alice may see ends the listing: the private s0010 and the servers she
	// may not call give no next.
	rep, err = cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, Principal: alice, Limit: 2, After: "s0004"})
	if err != nil || rep.Error != nil {
		t.Fatalf("%v %+v", err, rep.Error)
	}
	if got := summaryNames(rep.Servers); !slices.Equal(got, []string{"s0005", "s0008"}) || rep.Next != "" {
		t.Errorf("alice, after s0004: %v next %q; want [s0005 s0008] and no next", got, rep.Next)
	}
	all, _ := serversPages(t, cl, "local", subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: "bob"}, Limit: 1}, 20)
	if got := summaryNames(all); !slices.Equal(got, []string{"s0001", "s0004", "s0005", "s0008", "s0010"}) {
		t.Errorf("bob: %v", got)
	}
}

// rejectedSnapshot is a tools snapshot of server "rej" as registrysync publishes one that left
// out a tool named with a secret and one without a schema, plus items the catalog refuses: one
// without a name and a name listed twice (collisions: TestServersRejectedCollision).
func rejectedSnapshot() *subjects.Snapshot {
	sn := snapshot("rej", "rejections", tool("ok", "fine"), tool("", "no name"), tool("ok", "twice"), tool("x", "fine too"))
	sn.Rejected = []subjects.Rejected{
		{Name: "get_[redacted]", Code: subjects.CodeSecretInName, Message: "its name holds a configured secret value"},
		{Name: "noschema", Code: subjects.CodeInvalidSchema, Message: "inputSchema is missing"},
	}
	return sn
}

// TestServersShowRejectedDefinitions: definitions left out of the catalog (by registrysync: a
// name holding a configured secret, an invalid schema; by the catalog: no name, listed twice,
// a public-name collision) were in logs, events and metrics only: `servers` said nothing. Each
// server lists them, with their (redacted) names and a stable code, bounded.
func TestServersShowRejectedDefinitions(t *testing.T) {
	env := natstest.Start(t)
	many := make([]subjects.Rejected, 40)
	for i := range many {
		many[i] = subjects.Rejected{Name: fmt.Sprintf("bad%02d", i), Code: subjects.CodeInvalidSchema, Message: "inputSchema is missing"}
	}
	big := snapshot("big", "many rejections", tool("fine", "fine"))
	big.Rejected = many
	seq := publish(t, env.JS, status("rej", subjects.StatusReady), rejectedSnapshot(),
		status("big", subjects.StatusReady), big)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	serviceUp(t, cl)

	got, _ := serversPages(t, cl, "local", subjects.ServersRequest{V: 1}, 5)
	byName := map[string]subjects.ServerSummary{}
	for _, s := range got {
		byName[s.Name] = s
	}
	rej := byName["rej"]
	want := []subjects.RejectedDefinition{
		{Kind: subjects.KindTools, Name: "get_[redacted]", Code: subjects.CodeSecretInName, Message: "its name holds a configured secret value"},
		{Kind: subjects.KindTools, Name: "noschema", Code: subjects.CodeInvalidSchema, Message: "inputSchema is missing"},
		{Kind: subjects.KindTools, Code: subjects.CodeInvalidDefinition, Message: "a tool needs a non-empty string name"},
		{Kind: subjects.KindTools, Name: "ok", Code: subjects.CodeDuplicateName, Message: "a tool with this name was listed before; the first one is kept"},
	}
	if !slices.Equal(rej.Rejected, want) || rej.RejectedMore != 0 || rej.Tools != 2 {
		t.Errorf("rej: %d tools, rejected %+v (+%d); want 2 tools and %+v", rej.Tools, rej.Rejected, rej.RejectedMore, want)
	}
	b := byName["big"]
	if len(b.Rejected) != MaxRejected || b.RejectedMore != 40-MaxRejected || b.Rejected[0].Name != "bad00" {
		t.Errorf("big: %d rejected (+%d), first %+v; want %d and %d more", len(b.Rejected), b.RejectedMore, b.Rejected, MaxRejected, 40-MaxRejected)
	}
	// A new list replaces the rejections of the last.
	clean := snapshot("rej", "rejections", tool("ok", "fine"))
	clean.Fingerprint = "clean"
	seq = publish(t, env.JS, clean)
	waitSeq(t, r.Catalog, seq)
	rep, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, After: "big"})
	if err != nil || rep.Error != nil || len(rep.Servers) != 1 || rep.Servers[0].Name != "rej" || len(rep.Servers[0].Rejected) != 0 {
		t.Errorf("after a clean list: %v %+v %+v; want rej without rejections", err, rep.Error, rep.Servers)
	}
}

// TestServersRejectedCollision: a tool refused because another tool holds its public name
// (here a 40-bit hash collision of two encoded names) is listed (name_collision), without
// saying which tool holds it: that one may be a tool the reader may not see.
func TestServersRejectedCollision(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, status("srv.a", subjects.StatusReady),
		snapshot("srv.a", "", tool(collidingTools[0], "first holder")),
		snapshot("srv.a", "", tool(collidingTools[0], "first holder"), tool(collidingTools[1], "second pair")),
	)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	serviceUp(t, cl)
	rep, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1})
	if err != nil || rep.Error != nil || len(rep.Servers) != 1 {
		t.Fatalf("%v %+v %+v", err, rep.Error, rep.Servers)
	}
	got := rep.Servers[0]
	want := []subjects.RejectedDefinition{{Kind: subjects.KindTools, Name: collidingTools[1], Code: subjects.CodeNameCollision,
		Message: "its public name " + subjects.PublicName("srv.a", collidingTools[1]) + " is held by another tool"}}
	if got.Tools != 1 || !slices.Equal(got.Rejected, want) {
		t.Errorf("srv.a: %d tools, rejected %+v; want 1 tool and %+v", got.Tools, got.Rejected, want)
	}
}

// TestServersRejectedPermissions: rejected definitions are shown only to principals who may
// see the server and its list, and under a configured policy only those of names the
// principal may call (a count of the others would hint at them).
func TestServersRejectedPermissions(t *testing.T) {
	env := natstest.Start(t)
	priv := snapshot("secretive", "private list", tool("fine", "fine"))
	priv.CacheScope, priv.AuthContext = subjects.ScopePrivate, "user:bob"
	priv.Rejected = []subjects.Rejected{{Name: "hidden_tool", Code: subjects.CodeInvalidSchema, Message: "inputSchema is missing"}}
	prompts := snapshot("secretive", "", json.RawMessage(`{"name":"p"}`))
	prompts.Kind = subjects.KindPrompts
	prompts.Rejected = []subjects.Rejected{{Name: "bad_prompt", Code: subjects.CodeInvalidDefinition, Message: "arguments must be an array"}}
	many := snapshot("rej", "rejections", tool("ok", "fine"))
	for i := range 40 {
		many.Rejected = append(many.Rejected, subjects.Rejected{Name: fmt.Sprintf("admin_%02d", i), Code: subjects.CodeInvalidSchema})
	}
	many.Rejected = append(rejectedSnapshot().Rejected, many.Rejected...)
	seq := publish(t, env.JS, status("rej", subjects.StatusReady), many, status("secretive", subjects.StatusReady), priv, prompts)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Roles: []string{"dev"}}, "bob": {Roles: []string{"admin"}}},
		Rules: []policy.Rule{
			{Name: "dev", Roles: []string{"dev"}, Allow: []string{"rej__*", "secretive__*"}, Deny: []string{"rej__admin_*"}},
			{Name: "admin", Roles: []string{"admin"}, Allow: []string{"*"}},
		},
	})
	r := startReplica(t, env, "", pol, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t), Timeout: 10 * time.Second}
	list := func(user string) map[string]subjects.ServerSummary {
		t.Helper()
		var rep subjects.ServersReply
		waitFor(t, "service up", func() bool {
			var err error
			rep, err = cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: user}})
			return err == nil
		})
		if rep.Error != nil {
			t.Fatalf("%s: %+v", user, rep.Error)
		}
		out := map[string]subjects.ServerSummary{}
		for _, s := range rep.Servers {
			out[s.Name] = s
		}
		return out
	}
	alice := list("alice")
	for _, d := range alice["rej"].Rejected {
		if strings.HasPrefix(d.Name, "admin_") {
			t.Errorf("alice sees the rejected %s she may not call", d.Name)
		}
	}
	if n := len(alice["rej"].Rejected); n != 2 || alice["rej"].RejectedMore != 0 {
		t.Errorf("alice: rej rejected %+v (+%d); want the 2 she may call and no count", alice["rej"].Rejected, alice["rej"].RejectedMore)
	}
	// secretive's tools are private to bob: alice may call none, so under a configured policy
	// the server is not hers to see, nor anything it rejected.
	if sec, ok := alice["secretive"]; ok {
		t.Errorf("alice sees secretive: %+v", sec)
	}
	bob := list("bob")
	if got := bob["rej"]; len(got.Rejected) != MaxRejected || got.RejectedMore != 0 {
		// Under a configured policy the count of what was not kept is never given.
		t.Errorf("bob: rej %d rejected (+%d); want %d and no count", len(got.Rejected), got.RejectedMore, MaxRejected)
	}
	if got := bob["secretive"]; len(got.Rejected) != 2 || got.Rejected[0].Name != "hidden_tool" || got.Rejected[1].Name != "bad_prompt" {
		t.Errorf("bob: secretive rejected %+v; want hidden_tool then bad_prompt", got.Rejected)
	}

	// Under the open policy the host's own user sees secretive (its prompts are public) and
	// the rejected prompt, not the rejected tool of the list private to bob; and the count of
	// what was not kept.
	open := startReplica(t, env, "", nil, nil)
	waitSeq(t, open.Catalog, seq)
	rep := open.Servers(context.Background(), subjects.ServersRequest{V: 1})
	if rep.Error != nil || len(rep.Servers) != 2 {
		t.Fatalf("open policy: %+v %v", rep.Error, summaryNames(rep.Servers))
	}
	if got := rep.Servers[0]; got.Name != "rej" || len(got.Rejected) != MaxRejected || got.RejectedMore != 42-MaxRejected {
		t.Errorf("open policy: rej %d rejected (+%d); want %d and %d more", len(got.Rejected), got.RejectedMore, MaxRejected, 42-MaxRejected)
	}
	if got := rep.Servers[1]; got.Name != "secretive" || len(got.Rejected) != 1 || got.Rejected[0].Name != "bad_prompt" || got.Rejected[0].Kind != subjects.KindPrompts {
		t.Errorf("open policy: secretive rejected %+v; want only bad_prompt", got.Rejected)
	}
}

// TestServersRejectedConverge: the rejected definitions are part of the stored catalog: a
// replica restarted on its store and a replica rebuilt by replay answer the same, with the
// same digest.
func TestServersRejectedConverge(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, status("rej", subjects.StatusReady), rejectedSnapshot())
	dir := t.TempDir()
	a := startReplica(t, env, dir, nil, nil)
	waitSeq(t, a.Catalog, seq)
	before := a.Servers(context.Background(), subjects.ServersRequest{V: 1})
	if before.Error != nil || len(before.Servers) != 1 || len(before.Servers[0].Rejected) != 4 {
		t.Fatalf("before: %+v %+v", before.Error, before.Servers)
	}
	d1, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	restarted := startReplica(t, env, dir, nil, nil)
	waitSeq(t, restarted.Catalog, seq)
	replayed := startReplica(t, env, "", nil, nil)
	waitSeq(t, replayed.Catalog, seq)
	for name, r := range map[string]*replica{"restarted": restarted, "replayed": replayed} {
		got := r.Servers(context.Background(), subjects.ServersRequest{V: 1})
		if g, w := string(mustJSON(got)), string(mustJSON(before)); g != w {
			t.Errorf("%s: %s\nwant %s", name, g, w)
		}
		if d, err := r.Digest(); err != nil || d != d1 {
			t.Errorf("%s: digest %s, %v; want %s", name, d, err, d1)
		}
	}
}

// TestServersRejectedCutNameHidden: a rejected tool's name is kept cut to 200 bytes (by
// registrysync, or by the catalog), and under a configured policy it was shown when the policy
// let the principal call a tool of the cut name: a deny that matches the end of the real name
// ("*_admin") did not match the cut one, so alice saw the first 200 bytes of the name of a tool
// she may not call. A name that may have been cut cannot be decided: it is shown only under
// the open policy.
func TestServersRejectedCutNameHidden(t *testing.T) {
	env := natstest.Start(t)
	long := strings.Repeat("a", 250) + "_admin"
	sn := snapshot("rej", "rejections", tool("ok", "fine"), tool(long, "first"), tool(long, "twice"))
	// As registrysync publishes a tool of that name without a schema: its name cut.
	sn.Rejected = []subjects.Rejected{{Name: strings.Repeat("b", 200) + "…", Code: subjects.CodeInvalidSchema, Message: "inputSchema is missing"}}
	seq := publish(t, env.JS, status("rej", subjects.StatusReady), sn)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Roles: []string{"dev"}}},
		Rules:      []policy.Rule{{Name: "dev", Roles: []string{"dev"}, Allow: []string{"rej__*"}, Deny: []string{"rej__*_admin"}}},
	})
	r := startReplica(t, env, "", pol, nil)
	waitSeq(t, r.Catalog, seq)
	rep := r.Servers(context.Background(), subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: "alice"}})
	if rep.Error != nil || len(rep.Servers) != 1 {
		t.Fatalf("%+v %v", rep.Error, summaryNames(rep.Servers))
	}
	for _, d := range rep.Servers[0].Rejected {
		if strings.HasPrefix(d.Name, "aaaa") || strings.HasPrefix(d.Name, "bbbb") {
			t.Errorf("alice sees the cut name %.20s… (%s) of a tool she may not call", d.Name, d.Code)
		}
	}
	// The open policy shows them (and the tool "ok" is listed under both).
	open := startReplica(t, env, "", nil, nil)
	waitSeq(t, open.Catalog, seq)
	rep = open.Servers(context.Background(), subjects.ServersRequest{V: 1})
	if rep.Error != nil || len(rep.Servers) != 1 || len(rep.Servers[0].Rejected) != 2 {
		t.Fatalf("open policy: %+v %+v", rep.Error, rep.Servers)
	}
}

// TestServersPagingWhileServersChange: servers added and removed between the pages of a
// listing (before the page's position, after it, and the very server a next names) neither
// skip nor repeat a server that was there through the whole listing.
func TestServersPagingWhileServersChange(t *testing.T) {
	d := openDirect(t, nil)
	var steady []string
	for i := range 40 {
		name := fmt.Sprintf("s%03d", 2*i)
		steady = append(steady, name)
		d.apply(status(name, subjects.StatusReady), snapshot(name, "", tool("t", "a tool")))
	}
	var got []string
	req := subjects.ServersRequest{V: 1, Limit: 3}
	for page := range 100 {
		rep := d.Servers(context.Background(), req)
		if rep.Error != nil {
			t.Fatalf("page %d: %+v", page, rep.Error)
		}
		for _, s := range rep.Servers {
			if len(got) > 0 && s.Name <= got[len(got)-1] {
				t.Fatalf("page %d: %s after %s", page, s.Name, got[len(got)-1])
			}
			got = append(got, s.Name)
		}
		if rep.Next == "" {
			break
		}
		// Between pages: a server appears before the position and one after it, the next
		// page's own after is removed, and one not yet listed comes and goes.
		n := len(got)
		d.apply(status(fmt.Sprintf("s%03d", 2*n-1), subjects.StatusReady), snapshot(fmt.Sprintf("s%03d", 2*n-1), "", tool("t", "new")))
		d.apply(status(fmt.Sprintf("s%03da", 2*n+7), subjects.StatusReady), snapshot(fmt.Sprintf("s%03da", 2*n+7), "", tool("t", "new")))
		d.apply(status(fmt.Sprintf("s%03db", 2*n+9), subjects.StatusReady))
		d.apply(status(fmt.Sprintf("s%03db", 2*n+9), subjects.StatusRemoved))
		if page%2 == 0 {
			d.apply(status(rep.Next, subjects.StatusRemoved))
			steady = slices.DeleteFunc(steady, func(s string) bool { return s == rep.Next })
		}
		req.After = rep.Next
	}
	for _, s := range steady {
		if !slices.Contains(got, s) {
			t.Errorf("%s, there through the whole listing, was skipped", s)
		}
	}
}
