package executor

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A call of a name no server lists says which listed names the caller probably meant, among
// the tools the caller may call only: never a tool the policy denies or a private list hides.
func TestNotFoundSuggests(t *testing.T) {
	r := startRig(t, rigOptions{
		servers: []string{"ticketing", "logging", "fixture"},
		exec:    Config{Policy: testPolicy(t)},
	})
	cases := []struct {
		name, tenant, tool string
		mod                []func(*subjects.CallRequest)
		want               string // the message's end
	}{
		{name: "case", tenant: "local", tool: "ticketing__createissue", want: "; did you mean ticketing__createIssue?"},
		{name: "separator", tenant: "local", tool: "ticketing.createIssue", want: "; did you mean ticketing__createIssue?"},
		{name: "one underscore, snake case", tenant: "local", tool: "ticketing_create_issue", want: "; did you mean ticketing__createIssue?"},
		{name: "no server", tenant: "local", tool: "createIssue", want: "; did you mean ticketing__createIssue?"},
		{name: "wrong server", tenant: "local", tool: "jira__createIssue", want: "; did you mean ticketing__createIssue?"},
		{name: "typo", tenant: "local", tool: "ticketing__creatIsue", want: "; did you mean ticketing__createIssue?"},
		{name: "two near", tenant: "local", tool: "ticketing__listIssue", want: "; did you mean ticketing__listIssues?"},
		{name: "nothing near", tenant: "local", tool: "ticketing__reopenEverything", want: "is listed by any connected server"},
		{name: "allowed to alice", tenant: "acme", tool: "fixture__Echo", mod: fns(as("alice")), want: "; did you mean fixture__echo?"},
		// Denied by alice's rule: not named.
		{name: "denied to alice", tenant: "acme", tool: "fixture__Fail", mod: fns(as("alice")), want: "is listed by any connected server"},
		// No rule lets bob call fixture's tools.
		{name: "not allowed to bob", tenant: "acme", tool: "fixture__Echo", mod: fns(as("bob")), want: "is listed by any connected server"},
		// ticketing's lists are private to local's context: alice sees none of them, and the
		// answer for a tool she may not see is the answer for one nobody lists.
		{name: "private to another context", tenant: "acme", tool: "ticketing__createissue", mod: fns(as("alice")), want: "is listed by any connected server"},
		{name: "invisible itself", tenant: "acme", tool: "ticketing__listIssues", mod: fns(as("alice")), want: "is listed by any connected server"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.call(c.tenant, c.tool, `{}`, c.mod...)
			if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeNotFound {
				t.Fatalf("got %s %+v, want refused not_found", res.Status, res.Error)
			}
			if !strings.HasSuffix(res.Error.Message, c.want) {
				t.Errorf("message %q, want it to end with %q", res.Error.Message, c.want)
			}
		})
	}
}
