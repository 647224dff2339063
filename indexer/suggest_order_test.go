package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// manyTools is a ready server listing a tool for each name, in the given order.
func manyTools(server string, names []string) []any {
	items := make([]json.RawMessage, len(names))
	for i, n := range names {
		items[i] = json.RawMessage(`{"name":"` + n + `","inputSchema":{"type":"object"}}`)
	}
	return []any{status(server, subjects.StatusReady), snapshot(server, "many tools", items...)}
}

// notFound asks r, as pr, for the details of each name on its own, reps times, and returns the
// not_found messages.
func notFound(t *testing.T, r *replica, pr subjects.Principal, names []string, reps int) []string {
	t.Helper()
	var out []string
	for range reps {
		for _, n := range names {
			rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{n}, Principal: pr})
			if rep.Error == nil || rep.Error.Code != subjects.CodeNotFound {
				t.Fatalf("%s: got %+v, want not_found", n, rep.Error)
			}
			out = append(out, rep.Error.Message)
		}
	}
	return out
}

// The suggestions for a server with more tools than a request compares are the same on every
// replica, whatever the order its tools were listed in, and on every request: they used to
// depend on the order a Go map was ranged over, so that replicas (meant to answer alike) and
// two requests to one replica named different tools.
func TestDetailsSuggestionsDeterministic(t *testing.T) {
	var names []string
	for i := range 3 * suggestBudget {
		names = append(names, fmt.Sprintf("t%05d", i))
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	asked := []string{"big__t11111x", "big__T05000", "big__t099999", "big__t14998y"}
	var answers [][]string
	for _, order := range [][]string{names, reversed} {
		env := natstest.Start(t)
		seq := publish(t, env.JS, manyTools("big", order)...)
		r := startReplica(t, env, "", nil, nil)
		waitSeq(t, r.Catalog, seq)
		answers = append(answers, notFound(t, r, subjects.Principal{}, asked, 8))
	}
	want := answers[0][:len(asked)]
	for _, a := range want {
		if !strings.Contains(a, "did you mean") {
			t.Errorf("no suggestion: %q", a)
		}
	}
	// The nearest tool is found, however many the server lists.
	if !strings.Contains(want[0], "big__t11111") {
		t.Errorf("%q does not suggest big__t11111", want[0])
	}
	for i, ans := range answers {
		for j, a := range ans {
			if w := want[j%len(asked)]; a != w {
				t.Errorf("replica %d, request %d: %q, want %q", i, j, a, w)
			}
		}
	}
}

// The tools a principal may not see do not change what it is suggested, however many: they
// used to count against the tools a request compares, so that adding hidden tools to a server
// took suggestions away (a hint that they are there).
func TestDetailsSuggestionsIgnoreHiddenTools(t *testing.T) {
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"alice": {Tenant: "acme", Roles: []string{"dev"}},
			"bob":   {Tenant: "acme", Roles: []string{"ops"}},
		},
		Rules: []policy.Rule{
			{Name: "dev", Roles: []string{"dev"}, Allow: []string{"big__*"}, Deny: []string{"big__*h"}},
			{Name: "ops", Roles: []string{"ops"}, Allow: []string{"*"}},
		},
	})
	var visible, all []string
	for i := range 1000 {
		visible = append(visible, fmt.Sprintf("v%05da", i))
	}
	for i := range 3 * suggestBudget { // interleaved with the visible ones, and as long
		all = append(all, fmt.Sprintf("v%05dh", i))
	}
	all = append(all, visible...)
	asked := []string{"big__v00500b", "big__v00999h", "big__v00010", "big__v01000a"}
	alice := subjects.Principal{User: "alice"}
	var answers [][]string
	for _, names := range [][]string{visible, all} {
		env := natstest.Start(t)
		seq := publish(t, env.JS, manyTools("big", names)...)
		r := startReplica(t, env, "", pol, nil)
		waitSeq(t, r.Catalog, seq)
		answers = append(answers, notFound(t, r, alice, asked, 4))
		bob := subjects.Principal{User: "bob"}
		if got := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{"big__v00000h"}, Principal: bob}); len(names) > len(visible) && got.Error != nil {
			t.Fatalf("the hidden tools are not listed: %+v", got.Error)
		}
	}
	if want := "no tool named big__v00500b (did you mean big__v00500a, big__v00000a or big__v00050a?)"; answers[0][0] != want {
		t.Errorf("got %q, want %q", answers[0][0], want)
	}
	for j, a := range answers[1] {
		if w := answers[0][j]; a != w {
			t.Errorf("with hidden tools, request %d: %q, want %q (as without them)", j, a, w)
		}
		if strings.Contains(a, "h?") || strings.Contains(a, "h,") || strings.Contains(a, "h or") {
			t.Errorf("a hidden tool suggested: %q", a)
		}
	}
}

// A server's tools in suggestion order (serverMem.sorted) stay those it lists, in order, as
// lists add, change and remove tools, and when the replica reopens its store.
func TestSuggestOrderFollowsLists(t *testing.T) {
	env := natstest.Start(t)
	dir := t.TempDir()
	check := func(r *replica, want ...string) {
		t.Helper()
		r.mu.RLock()
		defer r.mu.RUnlock()
		var got []string
		if s := r.servers["srv"]; s != nil {
			for i, e := range s.sorted {
				if s.tools[e.tool] != e {
					t.Errorf("sorted[%d] %s is not the listed entry", i, e.tool)
				}
				got = append(got, e.tool)
			}
			if len(s.sorted) != len(s.tools) {
				t.Errorf("%d sorted, %d listed", len(s.sorted), len(s.tools))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("sorted %v, want %v", got, want)
		}
	}
	seq := publish(t, env.JS, status("srv", subjects.StatusReady),
		snapshot("srv", "d", tool("zeta", "z"), tool("b_b", "b"), tool("aa", "a"), tool("Ccc", "c")))
	r := startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	check(r, "aa", "b_b", "Ccc", "zeta") // keys aa, bb, ccc, zeta
	seq = publish(t, env.JS, snapshot("srv", "d", tool("zeta", "changed"), tool("aa", "a"), tool("x", "x"), tool("dd", "d")))
	waitSeq(t, r.Catalog, seq)
	check(r, "x", "aa", "dd", "zeta")
	r.stop(t)
	r = startReplica(t, env, dir, nil, nil)
	waitSeq(t, r.Catalog, seq)
	check(r, "x", "aa", "dd", "zeta")
	seq = publish(t, env.JS, status("srv", subjects.StatusRemoved))
	waitSeq(t, r.Catalog, seq)
	check(r)
}
