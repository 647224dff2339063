package indexer

import (
	"context"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Details of a name nobody lists say which visible names the caller probably meant; a tool the
// caller may not see is never one of them.
func TestDetailsSuggests(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"alice": {Tenant: "acme", Roles: []string{"support"}},
			"bob":   {Tenant: "acme", Roles: []string{"ops"}},
		},
		Rules: []policy.Rule{
			{Name: "support", Roles: []string{"support"}, Allow: []string{"kb__*", "ticketing__*"}, Deny: []string{"ticketing__closeIssue"}},
			{Name: "ops", Roles: []string{"ops"}, Allow: []string{"*"}},
		},
	})
	r := startReplica(t, env, "", pol, nil)
	waitSeq(t, r.Catalog, seq)
	alice := subjects.Principal{User: "alice"}
	bob := subjects.Principal{User: "bob"}
	for _, c := range []struct {
		who   subjects.Principal
		names []string
		want  string
	}{
		{alice, []string{"ticketing__createissue"}, "no tool named ticketing__createissue (did you mean ticketing__createIssue?)"},
		{alice, []string{"ticketing.listIssue", "kb__nothing"}, "no tool named ticketing.listIssue (did you mean ticketing__listIssues?), kb__nothing"},
		{alice, []string{"ticketing__closeissue"}, "no tool named ticketing__closeissue"}, // denied to alice
		{alice, []string{"logging__getlogs"}, "no tool named logging__getlogs"},           // no rule of alice's allows logging
		{bob, []string{"logging__getlogs"}, "no tool named logging__getlogs (did you mean logging__getLogs?)"},
		{bob, []string{"ticketing__closeissue"}, "no tool named ticketing__closeissue (did you mean ticketing__closeIssue?)"},
		// Found by a search as alice: without the server, or on another server.
		{alice, []string{"createIssue"}, "no tool named createIssue (did you mean ticketing__createIssue?)"},
		{alice, []string{"jira__create_issue"}, "no tool named jira__create_issue (did you mean ticketing__createIssue?)"},
		{alice, []string{"closeIssue"}, "no tool named closeIssue"}, // denied to alice
		{bob, []string{"closeIssue"}, "no tool named closeIssue (did you mean ticketing__closeIssue?)"},
		// Searched for the first three missing names only.
		{bob, []string{"a", "b", "c", "closeIssue"}, "no tool named a, b, c, closeIssue"},
	} {
		rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: c.names, Principal: c.who})
		if rep.Error == nil || rep.Error.Code != subjects.CodeNotFound || rep.Error.Message != c.want {
			t.Errorf("%s %v: got %+v, want not_found %q", c.who.User, c.names, rep.Error, c.want)
		}
	}
	// The budget stops comparing, and then no name is suggested.
	r.mu.RLock()
	vis := r.visibility(&filter{pr: subjects.Principal{Tenant: "acme", User: "bob", Roles: []string{"ops"}}})
	budget := 0
	got := r.suggestions(vis, &seenTools{marks: map[*serverMem][]uint8{}, checks: suggestChecks}, "logging__getlogs", &budget)
	// Nor with the visibility questions spent.
	budget = suggestBudget
	got = append(got, r.suggestions(vis, &seenTools{marks: map[*serverMem][]uint8{}}, "logging__getlogs", &budget)...)
	vis.release()
	r.mu.RUnlock()
	if len(got) != 0 {
		t.Errorf("with no budget or no questions left: %v", got)
	}
}

// Details suggests only tools a call would take: never one that is revoked, whose server is
// unavailable, or whose list changed and is being re-listed (a call refuses those), as search
// leaves them out.
func TestDetailsSuggestsOnlyCallable(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, append(demoEvents(t),
		revoke("ticketing", []string{"createIssue"}, nil),
		status("logging", subjects.StatusUnavailable),
		changed("kb"))...)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	for _, c := range []struct{ name, want string }{
		{"ticketing__createissue", "no tool named ticketing__createissue"}, // revoked
		{"logging__getlogs", "no tool named logging__getlogs"},             // unavailable
		{"kb__get_documents", "no tool named kb__get_documents"},           // stale
		// Its neighbours still are (the answer is not empty because the server is silent).
		{"ticketing__listIssue", "no tool named ticketing__listIssue (did you mean ticketing__listIssues?)"},
	} {
		rep := r.Details(context.Background(), subjects.DetailsRequest{V: 1, Names: []string{c.name}})
		if rep.Error == nil || rep.Error.Code != subjects.CodeNotFound || rep.Error.Message != c.want {
			t.Errorf("%s: got %+v, want not_found %q", c.name, rep.Error, c.want)
		}
	}
}
