package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Configurations with policyA and limits: the same limits written two ways, and other limits.
const (
	limitsA = policyA + `limits:
  tenant: {perSecond: 50, burst: 100, concurrency: 32}
  servers:
    "*": {perSecond: 20, burst: 40}
    github: {perSecond: 5, concurrency: 4}
  tools:
    "github__create*": {perSecond: 1, burst: 2}
`
	// The same limits: flow style, keys in another order, github's burst spelled out (the 5
	// it defaults to), and a server entry equal to "*" (what kb gets anyway).
	limitsASame = policyASameRules + `limits: {tools: {"github__create*": {burst: 2, perSecond: 1}},
  servers: {github: {concurrency: 4, burst: 5, perSecond: 5}, kb: {burst: 40, perSecond: 20}, "*": {burst: 40, perSecond: 20}},
  tenant: {concurrency: 32, burst: 100, perSecond: 50}}
`
	// Another limit for github: the same policy.
	limitsB = policyA + `limits:
  tenant: {perSecond: 50, burst: 100, concurrency: 32}
  servers:
    "*": {perSecond: 20, burst: 40}
    github: {perSecond: 50, concurrency: 4}
  tools:
    "github__create*": {perSecond: 1, burst: 2}
`
)

// enforcementOf reads the "enforcement" object of a `policy check --json` report (nil without).
func enforcementOf(t *testing.T, url string, extra ...string) (map[string]any, int, string) {
	t.Helper()
	out, errOut, err := catRun(t, append([]string{"policy", "check", "--nats", url, "--json", "--wait", "1s"}, extra...)...)
	code := 0
	if ec, ok := err.(exitCode); ok {
		code = int(ec)
	} else if err != nil {
		t.Fatalf("policy check: %v\n%s", err, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("policy check --json: %v\n%s", err, out)
	}
	enf, _ := r["enforcement"].(map[string]any)
	if c, _ := r["consistent"].(bool); c && code != 0 {
		t.Errorf("report says consistent, exit status %d", code)
	}
	return enf, code, errOut
}

// Two executors with one policy and different limits share the calls stream: a call's answer
// depends on which one takes it. Before, `policy check` said all was consistent (the digests
// covered only the policy section) and neither executor warned. Now the check exits 1 naming
// the enforcement mismatch, and each executor's own check warns and sets
// mcpstream_executor_enforcement_mismatch.
func TestPolicyCheckReportsEnforcementMismatch(t *testing.T) {
	checkPolicyOften(t)
	env := natstest.Start(t)
	cfgA, cfgB := writeConfig(t, "a.yaml", limitsA), writeConfig(t, "b.yaml", limitsB)
	if configDigest(t, cfgA) != configDigest(t, cfgB) {
		t.Fatal("the two configurations should have one policy")
	}
	// In one test process both would be host:pid: --replica tells them apart.
	exA := startPolicyRole(t, env.URL, "executor", "--config", cfgA, "--workers", "1", "--replica", "a")
	exB := startPolicyRole(t, env.URL, "executor", "--config", cfgB, "--workers", "1", "--no-front-end", "--replica", "b")
	startPolicyRole(t, env.URL, "indexer", "--config", cfgA, "--replica", "a") // has no enforcement digest: not compared

	enf, code, errOut := enforcementOf(t, env.URL)
	if code != 1 || !strings.Contains(errOut, "ENFORCEMENT MISMATCH") {
		t.Errorf("check: exit %d, stderr %q; want exit 1 naming the enforcement mismatch", code, errOut)
	}
	if enf == nil || enf["mismatched"] != 2.0 || enf["consistent"] != false || len(enf["digests"].(map[string]any)) != 2 {
		t.Errorf("enforcement report %v; want two executors with two digests, both mismatched (a tie)", enf)
	}
	// With --config A: B's executor is the one that differs.
	enf, code, errOut = enforcementOf(t, env.URL, "--config", cfgA)
	if code != 1 || enf == nil || enf["mismatched"] != 1.0 || !strings.Contains(errOut, "1 of 2 executor(s)") {
		t.Errorf("check --config A: exit %d, enforcement %v, stderr %q", code, enf, errOut)
	}
	out, _, _ := catRun(t, "policy", "check", "--nats", env.URL, "--config", cfgA)
	if !regexp.MustCompile(`(?m)^\S+\s+v1-[0-9a-f]{32}\s+MISMATCH$`).MatchString(out) || !strings.Contains(out, "ENFORCEMENT MISMATCH") {
		t.Errorf("text output does not show the executor that differs:\n%s", out)
	}

	for name, p := range map[string]*roleProcess{"A": exA, "B": exB} {
		mismatch := regexp.MustCompile(`(?m)^mcpstream_executor_enforcement_mismatch 1$`)
		var metrics string
		waitFor(t, name+"'s mcpstream_executor_enforcement_mismatch 1", 200, func() bool {
			metrics = scrape(t, p.http)
			return mismatch.MatchString(metrics)
		})
		for _, want := range []string{`mcpstream_policy_mismatch{role="executor"} 0`, "mcpstream_executor_enforcement_mismatched_instances 1",
			"mcpstream_executor_enforcement_info{digest=\"v1-"} {
			if !strings.Contains(metrics, want) {
				t.Errorf("executor %s: no %s in\n%s", name, want, grepLines(metrics, "mcpstream_"))
			}
		}
		if !strings.Contains(p.errOut.String(), "enforcement check: MISMATCH") {
			t.Errorf("executor %s logged no enforcement mismatch:\n%s", name, p.errOut.String())
		}
	}
}

// The same limits written differently (and a workers-only executor): consistent, exit 0, no
// warning; `policy digest` prints one enforcement digest for both files, another for B's.
func TestPolicyCheckSameLimitsWrittenDifferently(t *testing.T) {
	checkPolicyOften(t)
	env := natstest.Start(t)
	cfgA, cfgA2, cfgB := writeConfig(t, "a.yaml", limitsA), writeConfig(t, "a2.yaml", limitsASame), writeConfig(t, "b.yaml", limitsB)
	digestLines := func(path string) []string {
		out, errOut, err := catRun(t, "policy", "digest", "--config", path)
		if err != nil {
			t.Fatalf("policy digest: %v\n%s", err, errOut)
		}
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	a, a2, b := digestLines(cfgA), digestLines(cfgA2), digestLines(cfgB)
	if len(a) != 2 || !strings.HasPrefix(a[0], configDigest(t, cfgA)+"  "+cfgA) || !strings.Contains(a[1], "enforcement") {
		t.Fatalf("policy digest --config: %q; want the policy line, then the enforcement one", a)
	}
	enfDigest := strings.Fields(a[1])[0]
	if strings.Fields(a2[1])[0] != enfDigest || strings.Fields(b[1])[0] == enfDigest {
		t.Errorf("enforcement digests: A %s, A written otherwise %s, B %s; want A = A2 ≠ B", a[1], a2[1], b[1])
	}

	ex := startPolicyRole(t, env.URL, "executor", "--config", cfgA, "--workers", "1", "--replica", "a")
	startPolicyRole(t, env.URL, "executor", "--config", cfgA2, "--workers", "1", "--no-front-end", "--replica", "b")
	startPolicyRole(t, env.URL, "executor", "--config", cfgA2, "--workers", "2", "--no-front-end", "--max-approval-waits", "2", "--replica", "c")

	for _, extra := range [][]string{nil, {"--config", cfgA2}} {
		enf, code, errOut := enforcementOf(t, env.URL, extra...)
		if code != 0 || enf == nil || enf["consistent"] != true || enf["mismatched"] != 0.0 {
			t.Errorf("check %v: exit %d, enforcement %v\n%s", extra, code, enf, errOut)
		}
		if d, _ := enf["digests"].(map[string]any); d[enfDigest] != 3.0 {
			t.Errorf("check %v: enforcement digests %v, want 3 with %s", extra, d, enfDigest)
		}
	}
	peers := regexp.MustCompile(`(?m)^mcpstream_executor_enforcement_peers 2$`)
	var metrics string
	waitFor(t, "mcpstream_executor_enforcement_peers 2", 200, func() bool {
		metrics = scrape(t, ex.http)
		return peers.MatchString(metrics)
	})
	if !strings.Contains(metrics, "mcpstream_executor_enforcement_mismatch 0") || !strings.Contains(metrics, `mcpstream_executor_enforcement_info{digest="`+enfDigest+`"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(metrics, "enforcement"))
	}
	if strings.Contains(ex.errOut.String(), "MISMATCH") {
		t.Errorf("warned of a mismatch:\n%s", ex.errOut.String())
	}
}

// An executor of an older mcpstream advertises no enforcement digest: it is unknown, never a
// mismatch, for `policy check` and for the other executors' own checks.
func TestPolicyCheckOldExecutorEnforcementUnknown(t *testing.T) {
	checkPolicyOften(t)
	env := natstest.Start(t)
	cfgA := writeConfig(t, "a.yaml", limitsA)
	old := env.Connect(t)
	svc, err := micro.AddService(old, micro.Config{Name: subjects.ExecutorService, Version: "0.9.0",
		Metadata: map[string]string{subjects.MetaRole: subjects.RoleExecutor, subjects.MetaInstance: "old:1", subjects.MetaPolicyDigest: configDigest(t, cfgA)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	ex := startPolicyRole(t, env.URL, "executor", "--config", cfgA, "--workers", "1")

	for _, extra := range [][]string{nil, {"--config", cfgA}} {
		enf, code, errOut := enforcementOf(t, env.URL, extra...)
		if code != 0 || enf == nil || enf["unknown"] != 1.0 || enf["mismatched"] != 0.0 || enf["consistent"] != true {
			t.Errorf("check %v: exit %d, enforcement %v; want exit 0, the old executor unknown\n%s", extra, code, enf, errOut)
		}
	}
	out, _, err := catRun(t, "policy", "check", "--nats", env.URL)
	if err != nil || !strings.Contains(out, "old:1") || !strings.Contains(out, "no enforcement digest advertised") {
		t.Errorf("text check: %v\n%s", err, out)
	}
	unknown := regexp.MustCompile(`(?m)^mcpstream_executor_enforcement_unknown_instances 1$`)
	var metrics string
	waitFor(t, "mcpstream_executor_enforcement_unknown_instances 1", 200, func() bool {
		metrics = scrape(t, ex.http)
		return unknown.MatchString(metrics)
	})
	if !strings.Contains(metrics, "mcpstream_executor_enforcement_mismatch 0") || strings.Contains(ex.errOut.String(), "MISMATCH") {
		t.Errorf("the old executor was taken for a mismatch:\n%s\n%s", grepLines(metrics, "enforcement"), ex.errOut.String())
	}
}

// compareEnforcement compares executors only (a catalog replica has no enforcement digest and
// is neither unknown nor a mismatch), counts an executor without one as unknown, and makes the
// report inconsistent on a mismatch only.
func TestCompareEnforcement(t *testing.T) {
	p, a, b := "v1-"+strings.Repeat("0", 32), "v1-"+strings.Repeat("a", 32), "v1-"+strings.Repeat("b", 32)
	ex := func(e string) policyInstance {
		return policyInstance{Role: subjects.RoleExecutor, Digest: p, Enforcement: e}
	}
	idx := policyInstance{Role: subjects.RoleIndexer, Digest: p}
	for _, tt := range []struct {
		name                         string
		insts                        []policyInstance
		expected                     string
		present                      bool
		mismatched, unknown          int
		consistent, reportConsistent bool
	}{
		{"catalog only", []policyInstance{idx}, "", false, 0, 0, false, true},
		{"old executors only", []policyInstance{idx, ex(""), ex("")}, "", false, 0, 0, false, true},
		{"old executor beside a new one", []policyInstance{idx, ex(""), ex(a)}, "", true, 0, 1, true, true},
		{"old executor, expected", []policyInstance{ex(""), ex(a)}, a, true, 0, 1, true, true},
		{"tie", []policyInstance{idx, ex(a), ex(b)}, "", true, 2, 0, false, false},
		{"majority", []policyInstance{ex(a), ex(a), ex(b), ex("")}, "", true, 1, 1, false, false},
		{"expected", []policyInstance{idx, ex(a), ex(b)}, b, true, 1, 0, false, false},
	} {
		r := comparePolicies(slices.Clone(tt.insts), "")
		r.compareEnforcement(tt.expected)
		e := r.Enforcement
		if (e != nil) != tt.present || r.Consistent != tt.reportConsistent {
			t.Errorf("%s: enforcement %+v, report consistent %v; want present %v, consistent %v", tt.name, e, r.Consistent, tt.present, tt.reportConsistent)
			continue
		}
		if e != nil && (e.Mismatched != tt.mismatched || e.Unknown != tt.unknown || e.Consistent != tt.consistent) {
			t.Errorf("%s: %+v; want mismatched %d, unknown %d, consistent %v", tt.name, *e, tt.mismatched, tt.unknown, tt.consistent)
		}
	}
	// The metadata key of an older executor is missing: unknown, with a reason; a catalog
	// replica's is never read.
	good := "v1-" + strings.Repeat("c", 32)
	for _, tt := range []struct{ data, enf, problem string }{
		{`{"name":"mcpstream-executor","id":"N1","metadata":{"policy.digest":"` + p + `","executor.enforcement.digest":"` + good + `"}}`, good, ""},
		{`{"name":"mcpstream-executor","id":"N2","metadata":{"policy.digest":"` + p + `"}}`, "", "no enforcement digest advertised (mcpstream before enforcement digests?)"},
		{`{"name":"mcpstream-executor","id":"N3","metadata":{"policy.digest":"` + p + `","executor.enforcement.digest":"v1-\u001b[31m"}}`, "", "malformed enforcement digest"},
		{`{"name":"mcpstream-catalog","id":"N4","metadata":{"policy.digest":"` + p + `","executor.enforcement.digest":"` + good + `"}}`, "", ""},
	} {
		in, ok := parsePolicyInfo([]byte(tt.data))
		if !ok || in.Enforcement != tt.enf || in.EnforcementProblem != tt.problem || in.Digest != p {
			t.Errorf("%s: %+v, %v; want enforcement %q, problem %q", tt.data, in, ok, tt.enf, tt.problem)
		}
	}
}

// The enforcement table and summary are public output too (scripts read --json): golden files
// pin them.
func TestPolicyCheckEnforcementOutputGolden(t *testing.T) {
	p, a, b := "v1-"+strings.Repeat("a", 32), "v1-"+strings.Repeat("c", 32), "v1-"+strings.Repeat("d", 32)
	insts := []policyInstance{
		{Role: subjects.RoleExecutor, Instance: "exec-1:4242", ID: "NUID1", Digest: p, Enforcement: a},
		{Role: subjects.RoleExecutor, Instance: "exec-2:4243", ID: "NUID2", Digest: p, Enforcement: b},
		{Role: subjects.RoleExecutor, Instance: "exec-3:4244", ID: "NUID3", Digest: p, EnforcementProblem: "no enforcement digest advertised (mcpstream before enforcement digests?)"},
		{Role: subjects.RoleIndexer, Instance: "idx-1:77/0", ID: "NUID4", Digest: p},
	}
	for _, tt := range []struct {
		golden   string
		expected bool
		json     bool
	}{
		{"policy_check_enforcement.txt", false, false},
		{"policy_check_enforcement_config.txt", true, false},
		{"policy_check_enforcement_config.json", true, true},
	} {
		var r policyReport
		if tt.expected {
			r = comparePolicies(slices.Clone(insts), p)
			r.compareEnforcement(a)
			r.ExpectedFrom = "mcpstream.yaml"
		} else {
			r = comparePolicies(slices.Clone(insts), "")
			r.compareEnforcement("")
		}
		var out strings.Builder
		if err := writePolicyReport(&out, r, tt.json); err != nil {
			t.Fatal(err)
		}
		golden(t, tt.golden, out.String())
	}
}
