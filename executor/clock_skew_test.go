package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// behindRelister answers a re-list as a registrysync whose clock is behind this host's would:
// the list is unchanged (the fingerprint the executor holds), confirmed at a listedAt on that
// clock.
type behindRelister struct {
	ex     **Executor
	behind time.Duration
	n      *counter
}

func (b behindRelister) Relist(_ context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	b.n.add(server)
	t := (*b.ex).reg.lookup(subjects.PublicName(server, "echo"))
	return subjects.RelistReply{V: subjects.Version, Fingerprint: t.Fingerprint, ListedAt: time.Now().UTC().Add(-b.behind)}
}

// A registrysync whose clock is behind the executor's by more than a list's ttlMs (or one that
// took over a server from a connector on a host whose clock was ahead) answers a re-list with a
// listedAt the executor's clock already counts as run out, or as older than the listedAt it
// holds. The re-list found the list unchanged all the same: the call goes through (the TTL
// restarts on the executor's clock), it is not refused unavailable on every call.
func TestExpiredListConfirmedDespiteClockSkew(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	var ex *Executor
	n := &counter{}
	ex = r.startExecutor(Config{Dispatcher: r.mgr, Relister: behindRelister{ex: &ex, behind: 10 * time.Minute, n: n}}, r.env.NC)
	r.waitTool("fixture__echo")
	// The fixture's ttlMs is 400 ms.
	waitFor(t, "the executor sees the list expired", func() bool {
		return ex.reg.view.Tool("fixture", "echo").State == staleness.Expired
	})
	res := r.call("local", "fixture__echo", `{"text":"skewed"}`)
	if res.Status != subjects.CallOK {
		t.Fatalf("call after the ttl ran out, re-listed unchanged by a registrysync 10 minutes behind: %s %+v, want ok", res.Status, res.Error)
	}
	if n.get("fixture") == 0 {
		t.Fatal("the expired list was not re-listed before the call")
	}
}
