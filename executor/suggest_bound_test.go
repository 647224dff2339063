package executor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// applyTo folds registry events into reg, in order, as the stream would give them.
func applyTo(t *testing.T, reg *registry, evs ...any) {
	t.Helper()
	for _, ev := range evs {
		var subject string
		switch e := ev.(type) {
		case *subjects.Snapshot:
			subject = subjects.RegistrySnapshot(e.Server, e.Kind)
		case *subjects.ListChanged:
			subject = subjects.RegistryChanged(e.Server, e.Kind)
		case *subjects.Status:
			subject = subjects.RegistryStatus(e.Server)
		default:
			t.Fatalf("event %T", ev)
		}
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		reg.apply(subject, data, reg.applied.Load()+1)
	}
}

func toolsOf(server string, listedAt time.Time, ttlMs *int64, names ...string) *subjects.Snapshot {
	items := make([]json.RawMessage, len(names))
	for i, n := range names {
		items[i] = json.RawMessage(fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, n))
	}
	return &subjects.Snapshot{V: subjects.Version, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools,
		Fingerprint: fmt.Sprintf("%s-%d", server, len(names)), ListedAt: listedAt, TTLMs: ttlMs, Items: items}
}

// A not_found answer names only tools a call would take: fresh ones, and expired ones (the call
// re-lists them first), not a tool whose list changed (a call is refused stale) or whose server
// is unavailable.
func TestNotFoundSuggestsOnlyCallable(t *testing.T) {
	p, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"dev"}}},
		Rules:      []policy.Rule{{Name: "devs", Roles: []string{"dev"}, Allow: []string{"*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{cfg: Config{Policy: p}, reg: newRegistry(testLogger(t))}
	rp, err := p.Resolve(subjects.Principal{Tenant: "acme", User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ready := func(s string) *subjects.Status {
		return &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: s, Status: subjects.StatusReady, At: time.Now()}
	}
	ttl := int64(1000)
	applyTo(t, e.reg,
		ready("fresh"), toolsOf("fresh", time.Now(), nil, "createIssue"),
		ready("expired"), toolsOf("expired", time.Now().Add(-time.Hour), &ttl, "createIssue"),
		ready("stale"), toolsOf("stale", time.Now(), nil, "createIssue"),
		&subjects.ListChanged{V: subjects.Version, Type: subjects.EventChanged, Server: "stale", Kind: subjects.KindTools, At: time.Now()},
		ready("down"), toolsOf("down", time.Now(), nil, "createIssue"),
		&subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "down", Status: subjects.StatusUnavailable, Reason: "gone", At: time.Now()},
	)
	// The same name on another server is suggested too (the fresh and the expired one), never
	// the stale or the unavailable one.
	both := "; did you mean expired__createIssue or fresh__createIssue?"
	for given, want := range map[string]string{
		"fresh__createissue":   "; did you mean fresh__createIssue or expired__createIssue?",
		"expired__createissue": "; did you mean expired__createIssue or fresh__createIssue?",
		"stale__createissue":   both,
		"down__createissue":    both,
		"createissue":          both,
	} {
		s := e.notFound(rp, given)
		if s.e == nil || s.e.Code != subjects.CodeNotFound || !strings.HasSuffix(s.e.Message, " is listed by any connected server"+want) {
			t.Errorf("%s: got %+v, want not_found ending %q", given, s.e, want)
		}
	}
}

// The names one not_found answer looks at are bounded, whichever way they are found: a server
// listing more tools than the budget under one key (the same letters, other separators) does not
// make every refusal of a name with that key weigh them all. Of the tools the caller may be
// offered, at most the budget are weighed; one it may not be offered costs the question, once
// per answer, and never a comparison.
func TestSuggestionsBounded(t *testing.T) {
	reg := newRegistry(testLogger(t))
	names := make([]string, suggestBudget+50)
	for i := range names {
		var b strings.Builder
		b.WriteString("x")
		for bit := range 15 {
			b.WriteByte("_-"[i>>bit&1])
		}
		names[i] = b.String()
	}
	applyTo(t, reg, toolsOf("many", time.Now(), nil, names...))
	if got := len(reg.listed["many"]); got != len(names) {
		t.Fatalf("%d tools listed, want %d", got, len(names))
	}
	for _, given := range []string{"other__x", "many__x", "x", "many__x_", "many__y", "many__xx"} {
		asked := map[*tool]int{}
		if got := reg.suggestions(given, func(t *tool) bool { asked[t]++; return false }); len(got) != 0 {
			t.Errorf("%s: %v suggested, none offered", given, got)
		}
		for tl, n := range asked {
			if n > 1 {
				t.Errorf("%s: asked %d times about %s", given, n, tl.Public)
			}
		}
		weighed := 0
		reg.suggestions(given, func(*tool) bool { weighed++; return true })
		if weighed > suggestBudget {
			t.Errorf("%s: %d tools weighed, more than the budget of %d", given, weighed, suggestBudget)
		}
	}
	// Hidden tools cost a question each, never more than suggestChecks per answer.
	hidden := make([]string, suggestChecks+100)
	for i := range hidden {
		var b strings.Builder
		b.WriteString("h")
		for bit := range 15 {
			b.WriteByte("_-"[i>>bit&1])
		}
		b.WriteByte("ab"[i>>15&1])
		hidden[i] = b.String()
	}
	applyTo(t, reg, toolsOf("hidden", time.Now(), nil, hidden...))
	for _, given := range []string{"hidden__h", "hidden__ha", "h"} {
		asked := 0
		if got := reg.suggestions(given, func(*tool) bool { asked++; return false }); len(got) != 0 {
			t.Errorf("%s: %v suggested, none offered", given, got)
		}
		if asked > suggestChecks {
			t.Errorf("%s: %d questions, more than suggestChecks (%d)", given, asked, suggestChecks)
		}
	}
	// A re-list that drops them drops them from what a not_found answer looks at.
	applyTo(t, reg, toolsOf("many", time.Now(), nil, "y"))
	asked := 0
	reg.suggestions("other__x", func(*tool) bool { asked++; return true })
	if asked != 0 {
		t.Errorf("%d tools weighed after their server stopped listing them", asked)
	}
}
