package indexer

import (
	"context"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestDetailsPartialNotFound pins what README says of a details request naming a tool that
// exists and one that does not: the one found is answered beside the not_found error (the one
// error reply whose list is not empty).
func TestDetailsPartialNotFound(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"ticketing__createIssue", "ticketing__noSuchTool"}})
	if rep.Error == nil || rep.Error.Code != subjects.CodeNotFound {
		t.Fatalf("error %+v: want not_found", rep.Error)
	}
	if len(rep.Tools) != 1 || rep.Tools[0].Name != "ticketing__createIssue" {
		t.Errorf("tools %+v: want the one found", rep.Tools)
	}
}
