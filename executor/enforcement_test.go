package executor

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/policy"
)

// The enforcement digest hashes what an executor decides about a call besides the policy:
// written otherwise (map order, defaults spelled out, Approve reordered and repeated, limits
// that change nothing) it is the same; any change of a limit, an approval pattern or a timeout
// changes it; what is this process's own (workers, name, secrets) does not.
func TestEnforcementDigestCanonical(t *testing.T) {
	base := func() Config {
		return Config{
			Limits: Limits{
				Tenant:  Rate{PerSecond: 50, Burst: 100, Concurrency: 32},
				Servers: map[string]Rate{"*": {PerSecond: 20, Burst: 40}, "github": {PerSecond: 2.5, Concurrency: 4}},
				Tools:   map[string]Rate{"github__create*": {PerSecond: 1, Burst: 2}, "kb__search": {}},
			},
			Approve: []string{"github__delete*", "jira__close*"},
		}
	}
	want := base().EnforcementDigest()
	if !policy.DigestPattern.MatchString(want) {
		t.Fatalf("digest %q does not match policy.DigestPattern", want)
	}
	if want == (Config{}).EnforcementDigest() {
		t.Fatal("limits and approval patterns digest like none")
	}
	if d := (Config{}).EnforcementDigest(); d == policy.Open().Digest() {
		t.Fatal("an enforcement digest equals a policy digest")
	}

	same := map[string]func(*Config){
		"defaults spelled out": func(c *Config) {
			c.CallTimeout, c.MaxCallTimeout = DefaultCallTimeout, DefaultMaxCallTimeout
			c.ApprovalTimeout, c.MaxApprovalTimeout = DefaultApprovalTimeout, DefaultMaxApprovalTimeout
			c.MaxResultBytes = DefaultMaxResultBytes
		},
		"burst spelled out":              func(c *Config) { c.Limits.Servers["github"] = Rate{PerSecond: 2.5, Burst: 3, Concurrency: 4} },
		"approve reordered and repeated": func(c *Config) { c.Approve = []string{"jira__close*", "github__delete*", "jira__close*"} },
		"server entry equal to *":        func(c *Config) { c.Limits.Servers["kb"] = Rate{PerSecond: 20, Burst: 40} },
		"maps rebuilt in another order": func(c *Config) {
			c.Limits.Servers = map[string]Rate{"github": {PerSecond: 2.5, Concurrency: 4}, "*": {PerSecond: 20, Burst: 40}}
			c.Limits.Tools = map[string]Rate{"kb__search": {}, "github__create*": {PerSecond: 1, Burst: 2}}
		},
		"not enforcement": func(c *Config) {
			c.Workers, c.MaxApprovalWaits, c.Name = 7, 3, "other"
			c.FrontEnd, c.NoWorkers = new(bool), true
			c.Secrets, c.AuditBytes, c.RetryMax = []string{"s3cret"}, 100, 9
			c.AckWait, c.StopGrace, c.ReconnectGrace = time.Minute, time.Minute, -1
		},
	}
	for name, change := range same {
		c := base()
		change(&c)
		if got := c.EnforcementDigest(); got != want {
			t.Errorf("%s: digest %s, want %s", name, got, want)
		}
	}
	// Without any limit: an all-zero limit, given or left out, is none.
	none := (Config{}).EnforcementDigest()
	for name, c := range map[string]Config{
		"zero tenant":         {Limits: Limits{Tenant: Rate{}}},
		"zero server entries": {Limits: Limits{Servers: map[string]Rate{"*": {}, "github": {}}}},
		"zero tool entries":   {Limits: Limits{Tools: map[string]Rate{"kb__*": {}}}},
		"empty approve":       {Approve: []string{}},
	} {
		if got := c.EnforcementDigest(); got != none {
			t.Errorf("%s: digest %s, want %s (no limits)", name, got, none)
		}
	}

	seen := map[string]string{want: "base"}
	for name, change := range map[string]func(*Config){
		"tenant rate":        func(c *Config) { c.Limits.Tenant.PerSecond = 51 },
		"tenant burst":       func(c *Config) { c.Limits.Tenant.Burst = 101 },
		"tenant concurrency": func(c *Config) { c.Limits.Tenant.Concurrency = 31 },
		"server rate":        func(c *Config) { c.Limits.Servers["github"] = Rate{PerSecond: 5, Concurrency: 4} },
		"server * removed":   func(c *Config) { delete(c.Limits.Servers, "*") },
		"server entry off":   func(c *Config) { c.Limits.Servers["kb"] = Rate{} }, // shadows "*"
		"tool pattern renamed": func(c *Config) {
			c.Limits.Tools = map[string]Rate{"github__crea*": {PerSecond: 1, Burst: 2}, "kb__search": {}}
		},
		"tool entry off gone":  func(c *Config) { delete(c.Limits.Tools, "kb__search") }, // it shadowed nothing here, but is kept
		"approve added":        func(c *Config) { c.Approve = append(c.Approve, "kb__*") },
		"approve removed":      func(c *Config) { c.Approve = c.Approve[:1] },
		"call timeout":         func(c *Config) { c.CallTimeout = 30 * time.Second },
		"max call timeout":     func(c *Config) { c.MaxCallTimeout = time.Minute },
		"approval timeout":     func(c *Config) { c.ApprovalTimeout = time.Minute },
		"max approval timeout": func(c *Config) { c.MaxApprovalTimeout = 2 * time.Hour },
		"max result bytes":     func(c *Config) { c.MaxResultBytes = 1 << 20 },
	} {
		c := base()
		change(&c)
		got := c.EnforcementDigest()
		if other, dup := seen[got]; dup {
			t.Errorf("%s: digest %s, the same as %s's", name, got, other)
		}
		seen[got] = name
	}
}
