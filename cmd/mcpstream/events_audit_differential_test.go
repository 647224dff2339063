package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsAuditDifferential: `events --json` over the audit and results streams prints, for
// every filter set it takes, exactly the stored messages whose subject one of the filters
// matches, in stream order, each once, payload as stored.
func TestEventsAuditDifferential(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(7, 7))
	tenants := []string{"acme", "local", "my.tenant", "ümlaut"}
	events := []string{subjects.AuditRequest, subjects.AuditDecision, subjects.AuditDispatch, subjects.AuditResult}
	for i := range 60 {
		tenant := tenants[rng.IntN(len(tenants))]
		id := fmt.Sprintf("c%d", rng.IntN(8))
		name := events[rng.IntN(len(events))]
		subj := subjects.Audit(tenant, name)
		if rng.IntN(10) == 0 {
			subj = subjects.AuditNoTenant(name)
		}
		publish(t, env.JS, subj, subjects.AuditEvent{V: 1, Type: "audit." + name, CallID: id, Tenant: tenant, User: "u", Tool: "s__t", At: t0.Add(time.Duration(i) * time.Second)})
		if name == subjects.AuditResult {
			publish(t, env.JS, subjects.Result(tenant, id+fmt.Sprint(i)), subjects.CallResult{V: 1, ID: id, Tenant: tenant, Tool: "s__t", Status: subjects.CallOK})
		}
	}
	tok := func() string { return subjects.EncodeToken(tenants[rng.IntN(len(tenants))]) }
	gen := func() []string {
		pool := []string{"audit.>", "audit.*.*", "audit." + tok() + ".*", "audit.*." + events[rng.IntN(4)], "audit." + tok() + ".>",
			"mcpstream.v1.audit." + tok() + "." + events[rng.IntN(4)], "audit.~~.*"}
		var out []string
		for range 1 + rng.IntN(3) {
			out = append(out, pool[rng.IntN(len(pool))])
		}
		return out
	}
	for round := range 25 {
		filters := gen()
		stream := subjects.AuditStream
		if round%5 == 4 {
			filters = []string{"results." + tok() + ".>"}
			stream = subjects.ResultsStream
		}
		args := []string{"events", "--json", "--nats", env.URL}
		for _, f := range filters {
			args = append(args, "--subject", f)
		}
		out, errOut, err := runCmd(t, ctx, args...)
		if err != nil {
			t.Errorf("%v: %v (%s)", filters, err, errOut)
			continue
		}
		var got []uint64
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Seq     uint64 `json:"seq"`
				Subject string `json:"subject"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			got = append(got, line.Seq)
		}
		s, err := env.JS.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := s.Info(ctx)
		var want []uint64
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			if slices.ContainsFunc(filters, func(f string) bool {
				if !strings.HasPrefix(f, "mcpstream.") {
					f = subjects.Root + "." + f
				}
				return subjectMatches(f, m.Subject)
			}) {
				want = append(want, seq)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("filters %v: printed %v, stream holds %v", filters, got, want)
		}
	}
}

// subjectMatches reports whether the NATS filter f matches subject s.
func subjectMatches(f, s string) bool {
	ft, st := strings.Split(f, "."), strings.Split(s, ".")
	for i, t := range ft {
		if t == ">" {
			return len(st) > i
		}
		if i >= len(st) || t != "*" && t != st[i] {
			return false
		}
	}
	return len(ft) == len(st)
}
