package indexer

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestOddDefinitionKeepsSiblings: a definition whose name the freshness view once read otherwise
// than the catalog (a struct decode failed on a non-string "uri", or took a later "NAME") was
// in the catalog but unknown to the view, which hid its whole server from search on a live
// replica, while a restarted replica (view rebuilt from the catalog) showed it.
func TestOddDefinitionKeepsSiblings(t *testing.T) {
	env := natstest.Start(t)
	odd := json.RawMessage(`{"name":"odd_tool","description":"zebra odd widget","uri":5,"NAME":"other","inputSchema":{"type":"object"}}`)
	seq := publish(t, env.JS, status("srv", subjects.StatusReady),
		snapshot("srv", "d", odd, tool("good_tool", "zebra good widget"), tool("other_tool", "quokka other thing")))
	dir := filepath.Join(t.TempDir(), "r")
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	live := names(find(t, r.Catalog, "zebra widget").Tools)
	quokka := names(find(t, r.Catalog, "quokka").Tools)
	r.stop(t)

	r2 := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r2.Catalog, seq)
	restarted := names(find(t, r2.Catalog, "zebra widget").Tools)
	if !slices.Contains(live, "srv__good_tool") || !slices.Contains(live, "srv__odd_tool") || !slices.Contains(quokka, "srv__other_tool") {
		t.Errorf("live replica hides the siblings of odd_tool: %v / %v", live, quokka)
	}
	if !slices.Equal(live, restarted) {
		t.Errorf("live and restarted replica disagree: %v vs %v", live, restarted)
	}
}
