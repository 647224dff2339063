package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsSummaryHostileFields: every field a registry or audit payload carries is text from
// outside; none may put a control character (terminal escape, forged line) on the terminal.
func TestEventsSummaryHostileFields(t *testing.T) {
	const evil = "x\n\x1b[31mforged"
	enc := func(v any) []byte { b, _ := json.Marshal(v); return b }
	p := &eventPrinter{prev: map[string][]string{}}
	cases := map[string]string{
		"status": p.summary(subjects.RegistryStatus("kb"), enc(subjects.Status{V: 1, Type: subjects.EventStatus, Server: "kb",
			Status: evil, Code: evil, Transport: evil, Protocol: evil, At: t0})),
		"revoked": p.summary(subjects.Root+".registry.kb.revoked", enc(subjects.Revocation{V: 1, Type: subjects.EventRevoked, Server: "kb",
			Tools: []string{evil}, Restore: []string{evil}, At: t0})),
		"result": p.summary(subjects.Result("acme", "c1"), enc(subjects.CallResult{V: 1, ID: "c1", Status: "failed",
			Error: &subjects.Error{Code: evil, Message: "m"}})),
	}
	snap := snapshot("kb", subjects.KindTools, t0, tools("a"))
	snap.CacheScope = evil
	cases["snapshot"] = p.summary(subjects.RegistrySnapshot("kb", subjects.KindTools), enc(snap))
	for name, got := range cases {
		if strings.ContainsAny(got, "\n\x1b") {
			t.Errorf("%s: control characters reach the terminal: %q", name, got)
		}
	}

	env := seedRegistry(t)
	publish(t, env.JS, subjects.RegistryStatus("kb"), subjects.Status{V: 1, Type: subjects.EventStatus, Server: "kb", Status: evil, At: t0.Add(time.Hour)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, "servers", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "\x1b") || strings.Contains(out, "\nforged") {
		t.Errorf("servers: control characters reach the terminal:\n%q", out)
	}
}
