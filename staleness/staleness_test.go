package staleness

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

func snap(server string, ttlMs *int64, at time.Time, names ...string) subjects.RegistryEvent {
	items := make([]json.RawMessage, len(names))
	for i, n := range names {
		items[i], _ = json.Marshal(map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
	}
	return subjects.RegistryEvent{Snapshot: &subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: server,
		Kind: subjects.KindTools, Fingerprint: "fp-" + at.String(), ListedAt: at, TTLMs: ttlMs, Items: items}}
}

func status(server, st string) subjects.RegistryEvent {
	return subjects.RegistryEvent{Status: &subjects.Status{V: 1, Type: subjects.EventStatus, Server: server, Status: st, Reason: "because"}}
}

func TestView(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := t0
	v := New(func() time.Time { return now })
	ms := int64(1000)

	check := func(step, server, tool string, want State) {
		t.Helper()
		if got := v.Tool(server, tool); got.State != want {
			t.Errorf("%s: Tool(%s, %s) = %s (%s), want %s", step, server, tool, got.State, got.Reason, want)
		}
	}
	check("empty", "kb", "search", Unknown)
	v.Apply(status("kb", subjects.StatusReady))
	v.Apply(snap("kb", &ms, t0, "search", "get"))
	check("listed", "kb", "search", Fresh)
	check("listed", "kb", "nope", Unknown)

	now = t0.Add(2 * time.Second)
	check("ttl ran out", "kb", "search", Expired)
	v.Confirm("kb", subjects.KindTools, "fp-"+t0.String(), now)
	check("confirmed", "kb", "search", Fresh)
	v.Confirm("kb", subjects.KindTools, "other", now.Add(time.Hour))
	check("confirm of another fingerprint ignored", "kb", "search", Fresh)

	v.Apply(subjects.RegistryEvent{ListChanged: &subjects.ListChanged{V: 1, Type: subjects.EventChanged, Server: "kb", Kind: subjects.KindTools}})
	check("list_changed beats ttl", "kb", "search", Stale)
	v.Apply(snap("kb", nil, now, "search"))
	check("relisted", "kb", "search", Fresh)
	check("removed", "kb", "get", Removed)

	v.Apply(status("kb", subjects.StatusUnavailable))
	check("down", "kb", "search", Unavailable)
	if r := v.Tool("kb", "search").Reason; r == "" {
		t.Error("unavailable without a reason")
	}
	check("removed beats unavailable", "kb", "get", Removed)
	v.Apply(status("kb", subjects.StatusReady))
	check("back", "kb", "search", Fresh)

	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb", Tools: []string{"search"}}})
	check("revoked", "kb", "search", Revoked)
	v.Apply(snap("kb", nil, now, "search"))
	check("a new snapshot does not lift a revocation", "kb", "search", Revoked)
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb", Restore: []string{"search"}}})
	check("restored", "kb", "search", Fresh)
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb", Tools: []string{"*"}}})
	check("all revoked", "kb", "search", Revoked)
	v.Apply(subjects.RegistryEvent{Revocation: &subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb", Restore: []string{"*"}}})

	v.Apply(status("kb", subjects.StatusRemoved))
	check("server removed", "kb", "search", Removed)
}

func TestItemName(t *testing.T) {
	tests := []struct {
		kind subjects.Kind
		raw  string
		want string
	}{
		{subjects.KindTools, `{"name":"a"}`, "a"},
		{subjects.KindResources, `{"name":"readme","uri":"file:///r"}`, "file:///r"},
		{subjects.KindTools, `junk`, ""},
		{subjects.KindTools, `{"name":5}`, ""},
		// Exactly the "name" key, as the connector and the catalog read it.
		{subjects.KindTools, `{"name":"odd","uri":5}`, "odd"},
		{subjects.KindTools, `{"name":"x","NAME":"y"}`, "x"},
		{subjects.KindTools, `{"Name":"x"}`, ""},
		{subjects.KindTools, `{"n\u0061me":"esc"}`, "esc"},
		{subjects.KindResources, `{"name":"readme","uri":5}`, "readme"},
		{subjects.KindTools, `{"name":null}`, ""},
		{subjects.KindTools, `["name"]`, ""},
	}
	for _, tt := range tests {
		if got := ItemName(tt.kind, json.RawMessage(tt.raw)); got != tt.want {
			t.Errorf("ItemName(%s, %s) = %q, want %q", tt.kind, tt.raw, got, tt.want)
		}
	}
}

// A server that renames its tools on every re-list must not grow the remembered removed names
// forever; the most recent removals still answer "removed".
func TestRemovedNamesBounded(t *testing.T) {
	v := New(nil)
	at := time.Unix(1, 0)
	for i := range 3 * MaxRemembered {
		v.Apply(snap("churn", nil, at.Add(time.Duration(i)), fmt.Sprintf("t%d", i)))
	}
	if n := len(v.servers["churn"].kinds[subjects.KindTools].removed); n > MaxRemembered {
		t.Fatalf("%d removed names remembered, want at most %d", n, MaxRemembered)
	}
	last := fmt.Sprintf("t%d", 3*MaxRemembered-2)
	if got := v.Tool("churn", last).State; got != Removed {
		t.Errorf("%s: %s, want removed", last, got)
	}
	if got := v.Tool("churn", fmt.Sprintf("t%d", 3*MaxRemembered-1)).State; got != Fresh {
		t.Errorf("current tool: %s, want fresh", got)
	}
}
