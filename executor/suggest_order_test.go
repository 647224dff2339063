package executor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// suggestRig is an executor's registry and policy, enough for its not_found answers.
func suggestRig(t *testing.T, p *policy.Policy, evs ...any) *Executor {
	t.Helper()
	e := &Executor{cfg: Config{Policy: p}, reg: newRegistry(testLogger(t))}
	applyTo(t, e.reg, evs...)
	return e
}

func readyStatus(server string) *subjects.Status {
	return &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady, At: time.Now()}
}

// notFoundMessages asks e, as user, for each name reps times and returns the not_found messages.
func notFoundMessages(t *testing.T, e *Executor, user string, names []string, reps int) []string {
	t.Helper()
	rp, err := e.cfg.Policy.Resolve(subjects.Principal{Tenant: "acme", User: user})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range reps {
		for _, n := range names {
			s := e.notFound(rp, n)
			if s.e == nil || s.e.Code != subjects.CodeNotFound {
				t.Fatalf("%s: got %+v, want not_found", n, s.e)
			}
			out = append(out, s.e.Message)
		}
	}
	return out
}

func openPolicy(t *testing.T, rules ...policy.Rule) *policy.Policy {
	t.Helper()
	p, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"alice": {Tenant: "acme", Roles: []string{"dev"}},
			"bob":   {Tenant: "acme", Roles: []string{"ops"}},
		},
		Rules: append(rules, policy.Rule{Name: "ops", Roles: []string{"ops"}, Allow: []string{"*"}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sepVariants returns n distinct names "d" + separators + "a" (all of key "da"), made of the
// separators seps (in the bits of i), as a server may list.
func sepVariants(n int, seps string, skip func(string) bool) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		var b strings.Builder
		b.WriteString("d")
		for bit := range 14 {
			b.WriteByte(seps[i>>bit&1])
		}
		b.WriteString("a")
		if s := b.String(); skip == nil || !skip(s) {
			out = append(out, s)
		}
	}
	return out
}

// The names a not_found answer suggests for a server with more tools than one answer weighs are
// the same on every executor, whatever the order its tools were listed in, and on every request:
// they used to depend on the order Go maps were ranged over (the server's tools, the names under
// one key), so that two executors, or two requests to one, named different tools.
func TestNotFoundSuggestionsDeterministic(t *testing.T) {
	var names []string
	for i := range 3 * suggestBudget {
		names = append(names, fmt.Sprintf("t%05d", i))
	}
	names = append(names, sepVariants(3*suggestBudget, "_-", nil)...) // one key, more than the budget
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	asked := []string{"big__t11111x", "big__T05000", "big__t099999", "big__t14998y", "big__DA", "big.d-a", "other__d_a"}
	p := openPolicy(t, policy.Rule{Name: "dev", Roles: []string{"dev"}, Allow: []string{"*"}})
	var answers [][]string
	for _, evs := range [][]any{
		{readyStatus("big"), toolsOf("big", time.Now(), nil, names...)},
		{readyStatus("big"), toolsOf("big", time.Now(), nil, reversed...)},
		// Listed in two steps: a first list of some, then all.
		{readyStatus("big"), toolsOf("big", time.Now(), nil, reversed[:7000]...), toolsOf("big", time.Now(), nil, names...)},
	} {
		e := suggestRig(t, p, evs...)
		answers = append(answers, notFoundMessages(t, e, "alice", asked, 6))
	}
	want := answers[0][:len(asked)]
	for _, a := range want {
		if !strings.Contains(a, "did you mean") {
			t.Errorf("no suggestion: %q", a)
		}
	}
	// The nearest tool is found, however many the server lists.
	if !strings.Contains(want[0], "did you mean big__t11111,") {
		t.Errorf("%q does not suggest big__t11111 first", want[0])
	}
	for i, ans := range answers {
		for j, a := range ans {
			if w := want[j%len(asked)]; a != w {
				t.Errorf("registry %d, request %d: %q, want %q", i, j, a, w)
			}
		}
	}
}

// The tools a principal may not call do not change what it is suggested, however many: they
// used to count against the tools an answer weighs, so that adding tools hidden from a
// principal took suggestions away from it (a hint that they are there).
func TestNotFoundSuggestionsIgnoreHiddenTools(t *testing.T) {
	// alice may call big's tools but those with a '-' in their names.
	p := openPolicy(t, policy.Rule{Name: "dev", Roles: []string{"dev"}, Allow: []string{"big__*"}, Deny: []string{"big__*-*"}})
	var visible, hidden []string
	for i := range 1000 {
		visible = append(visible, fmt.Sprintf("v%05da", i))
	}
	for i := range 3 * suggestBudget { // interleaved with the visible ones, and as long
		hidden = append(hidden, fmt.Sprintf("v%05d-h", i))
	}
	for i := range 10 {
		visible = append(visible, "d"+strings.Repeat("_", i)+"a")
	}
	hidden = append(hidden, sepVariants(3*suggestBudget, "_-", func(s string) bool { return !strings.Contains(s, "-") })...)
	all := append(slices.Clone(hidden), visible...)
	asked := []string{"big__v00500b", "big__v00999h", "big__v00010", "big__v01000a", "big__DA", "big__d-a", "da"}
	var answers [][]string
	for _, names := range [][]string{visible, all} {
		e := suggestRig(t, p, readyStatus("big"), toolsOf("big", time.Now(), nil, names...))
		answers = append(answers, notFoundMessages(t, e, "alice", asked, 3))
		if len(names) > len(visible) {
			if e.reg.lookup("big__v00000-h") == nil || e.reg.lookup("big__"+hidden[len(hidden)-1]) == nil {
				t.Fatal("the hidden tools are not listed")
			}
		}
	}
	if want := "no tool big__v00500b is listed by any connected server; did you mean big__v00500a, big__v00000a or big__v00050a?"; answers[0][0] != want {
		t.Errorf("got %q, want %q", answers[0][0], want)
	}
	for j, a := range answers[1] {
		if w := answers[0][j]; a != w {
			t.Errorf("with hidden tools, request %d: %q, want %q (as without them)", j, a, w)
		}
		if _, q, _ := strings.Cut(a, "did you mean"); strings.Contains(q, "-") {
			t.Errorf("a hidden tool suggested: %q", a)
		}
	}
}
