package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// serverRecorder answers the calls of one server itself and records which tool each ran;
// other servers' calls go to inner.
type serverRecorder struct {
	inner  Dispatcher
	server string
	mu     sync.Mutex
	tools  []string
}

func (d *serverRecorder) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	if server != d.server {
		return d.inner.Dispatch(ctx, server, req)
	}
	d.mu.Lock()
	d.tools = append(d.tools, req.Tool)
	d.mu.Unlock()
	return subjects.DispatchReply{V: subjects.Version, Result: json.RawMessage(`{"content":[{"type":"text","text":"ran ` + req.Tool + `"}]}`)}
}

// Two tools whose encoded public names collide (a 40-bit hash collision: the two long names
// below, found by a birthday search, shorten to the same words and share their 10 hex digits)
// are one name for two tools. The catalog keeps the tool that holds the name and refuses the
// other (logged, never shadowed); the executor must map the name to the same tool, or a call of
// what search shows runs another tool, decided by the policy on that other one: here the one
// tool a rule allows is found by search and refused forbidden by the executor, and a call would
// run the tool nobody may see.
func TestPublicNameCollisionKeepsTheHolder(t *testing.T) {
	long := strings.Repeat("a", 62)
	first, second := long+"370900", long+"1146115"
	pub := subjects.PublicName("ghost", first)
	if other := subjects.PublicName("ghost", second); other != pub {
		t.Fatalf("no collision: %s and %s", pub, other)
	}
	pol, err := policy.New(&policy.Config{Rules: []policy.Rule{{Name: "first only", Allow: []string{"ghost__" + first, "fixture__*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	rec := &serverRecorder{inner: r.mgr, server: "ghost"}
	r.startExecutor(Config{Policy: pol, Dispatcher: rec, Relister: r.mgr}, r.env.NC)
	cat := startCatalog(t, r, time.Now)

	def := func(name, prop string) json.RawMessage {
		return json.RawMessage(`{"name":"` + name + `","description":"Tool ` + prop + `.","inputSchema":{"type":"object","properties":{"` +
			prop + `":{"type":"string"}},"required":["` + prop + `"]},"annotations":{"readOnlyHint":true}}`)
	}
	r.publishRegistry(subjects.RegistryStatus("ghost"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "ghost", Status: subjects.StatusReady, At: time.Now()})
	r.publishRegistry(subjects.RegistrySnapshot("ghost", subjects.KindTools), subjects.Snapshot{
		V: 1, Type: subjects.EventSnapshot, Server: "ghost", Kind: subjects.KindTools, Fingerprint: "f1", ListedAt: time.Now(), Pages: 1,
		Items: []json.RawMessage{def(first, "x"), def(second, "y")},
	})
	r.waitTool(pub)

	var shown subjects.ToolInfo
	waitFor(t, "the catalog shows "+pub, func() bool {
		rep := cat.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{pub}})
		if rep.Error != nil || len(rep.Tools) != 1 {
			return false
		}
		shown = rep.Tools[0]
		return true
	})
	if shown.Tool != first {
		t.Fatalf("the catalog shows %s as %q, want the first listed (%q)", pub, shown.Tool, first)
	}

	res := r.call("local", pub, `{"x":"1"}`)
	if res.Status != subjects.CallOK {
		t.Fatalf("call of %s, which search shows as %s and a rule allows: %s %+v", pub, first, res.Status, res.Error)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.tools) != 1 || rec.tools[0] != first {
		t.Errorf("ran %q, want %q (the tool search shows under %s)", rec.tools, first, pub)
	}
}
