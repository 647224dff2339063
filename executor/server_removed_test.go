package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A server removed (servers remove) is refused stale with reason removed, by the executor that
// saw the removal and by one that starts after it and rebuilds from the stream.
func TestServerRemovedRefused(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.mgr.Remove(ctx, "ticketing"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removal applied", func() bool {
		return r.ex.reg.view.Tool("ticketing", "createIssue").State == "removed"
	})
	check := func(when string) {
		t.Helper()
		res := r.call("local", "ticketing__createIssue", `{"title":"x","body":"","priority":"low"}`)
		if res.Error == nil || res.Error.Code != subjects.CodeStale || !strings.Contains(res.Error.Message, "removed") {
			t.Errorf("%s: got %s %+v, want stale (removed)", when, res.Status, res.Error)
		}
	}
	check("live")
	ex2 := r.startExecutor(r.managerConfig(Config{}), r.env.NC)
	waitFor(t, "the new executor applied the removal", func() bool {
		return ex2.reg.view.Tool("ticketing", "createIssue").State == "removed"
	})
	for range 4 {
		check("rebuilt")
	}
}
