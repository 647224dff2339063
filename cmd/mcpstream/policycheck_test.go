package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// Two configurations with one policy written differently, and one with another policy.
const (
	policyA = `servers: []
policy:
  principals:
    alice: {tenant: acme, roles: [dev]}
  rules:
    - name: devs
      roles: [dev]
      allow: ["*"]
      deny: ["payments__*", "billing__*"]
`
	policyASameRules = `# the same policy, another way
servers: []
policy: {rules: [{deny: ["billing__*", "payments__*"], allow: ["*"], roles: [dev], name: devs}],
         principals: {alice: {roles: [dev, dev], tenant: acme}}}
`
	policyB = `servers: []
policy:
  principals:
    alice: {tenant: acme, roles: [dev]}
  rules:
    - name: devs
      roles: [dev]
      allow: ["*"]
      deny: ["billing__*"]
`
)

func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func configDigest(t *testing.T, path string) string {
	t.Helper()
	p, _, _, err := localPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	return p.Digest()
}

// checkPolicyOften makes role processes started by the test check policies every 100 ms.
func checkPolicyOften(t *testing.T) {
	old := policyCheckEvery
	policyCheckEvery = 100 * time.Millisecond
	t.Cleanup(func() { policyCheckEvery = old }) // registered first: runs after the roles stopped
}

// startPolicyRole starts an indexer or executor role in-process and waits until /healthz says
// it serves (a catalog replica answers $SRV.INFO only then).
func startPolicyRole(t *testing.T, url string, args ...string) *roleProcess {
	t.Helper()
	p := startRole(t, append(args, "--nats", url, "--data", t.TempDir())...)
	waitFor(t, args[0]+" ready", 600, func() bool {
		code, _, _ := p.healthz()
		return code == 200
	})
	return p
}

// policyCheck runs `policy check --json` and returns its report and exit status.
func policyCheck(t *testing.T, url string, extra ...string) (policyReport, int, string) {
	t.Helper()
	out, errOut, err := catRun(t, append([]string{"policy", "check", "--nats", url, "--json", "--wait", "1s"}, extra...)...)
	code := 0
	if err != nil {
		ec, ok := err.(exitCode)
		if !ok {
			t.Fatalf("policy check: %v\n%s", err, errOut)
		}
		code = int(ec)
	}
	var r policyReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("policy check --json: %v\n%s\n%s", err, out, errOut)
	}
	return r, code, errOut
}

func roleDigests(r policyReport) map[string][]string {
	m := map[string][]string{}
	for _, in := range r.Instances {
		m[in.Role] = append(m[in.Role], in.Digest)
	}
	return m
}

// A catalog replica and an executor started with different policies: the check says so and
// exits 1, and each role's own check warns and sets mcpstream_policy_mismatch. Before, nothing
// compared them: search showed tools the executor refused, silently.
func TestPolicyCheckReportsMismatch(t *testing.T) {
	checkPolicyOften(t)
	env := natstest.Start(t)
	cfgA, cfgB := writeConfig(t, "a.yaml", policyA), writeConfig(t, "b.yaml", policyB)
	digestA, digestB := configDigest(t, cfgA), configDigest(t, cfgB)
	if digestA == digestB {
		t.Fatalf("policies A and B have one digest %s", digestA)
	}
	idx := startPolicyRole(t, env.URL, "indexer", "--config", cfgA, "--replica", "a")
	ex := startPolicyRole(t, env.URL, "executor", "--config", cfgB, "--workers", "2")

	// Each role says which policy it enforces in its start line and its log.
	if !strings.Contains(idx.out.String(), ", policy "+digestA) || !strings.Contains(ex.out.String(), ", policy "+digestB) {
		t.Errorf("start lines lack the policy digest:\n%s\n%s", idx.out.String(), ex.out.String())
	}
	if !strings.Contains(ex.errOut.String(), digestB) {
		t.Errorf("executor log lacks its policy digest %s:\n%s", digestB, ex.errOut.String())
	}

	// Without --config: the instances disagree with each other.
	r, code, errOut := policyCheck(t, env.URL)
	if code != 1 || r.Consistent || r.Mismatched == 0 || len(r.Digests) != 2 {
		t.Errorf("check without --config: exit %d, report %+v; want exit 1 and two digests\n%s", code, r, errOut)
	}
	if got := roleDigests(r); len(got[subjects.RoleIndexer]) != 1 || got[subjects.RoleIndexer][0] != digestA ||
		len(got[subjects.RoleExecutor]) != 1 || got[subjects.RoleExecutor][0] != digestB {
		t.Errorf("instances %+v, want the indexer with %s and the executor with %s", r.Instances, digestA, digestB)
	}
	if !strings.Contains(errOut, "MISMATCH") {
		t.Errorf("no clear message on stderr: %q", errOut)
	}

	// With --config A: the executor is the one that differs.
	r, code, errOut = policyCheck(t, env.URL, "--config", cfgA)
	if code != 1 || r.Expected != digestA || r.Mismatched != 1 {
		t.Errorf("check --config A: exit %d, report %+v; want exit 1, one mismatch\n%s", code, r, errOut)
	}
	for _, in := range r.Instances {
		if want := in.Role == subjects.RoleIndexer; in.Match == nil || *in.Match != want {
			t.Errorf("%s %s: match %v, want %v", in.Role, in.Instance, in.Match, want)
		}
	}
	if !strings.Contains(errOut, "1 of 2 instance(s) enforce another policy than "+cfgA) {
		t.Errorf("stderr %q does not say which", errOut)
	}

	// Text output names each instance and the verdict.
	out, _, err := catRun(t, "policy", "check", "--nats", env.URL, "--config", cfgA)
	if ec, ok := err.(exitCode); !ok || ec != 1 {
		t.Errorf("text check: %v, want exit status 1", err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^indexer\s+\S+/a\s+` + digestA + `\s+ok$`),
		regexp.MustCompile(`(?m)^executor\s+\S+\s+` + digestB + `\s+MISMATCH$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("text output lacks %s:\n%s", want, out)
		}
	}

	// Each role's own check: a warning in the log and the metric.
	for name, p := range map[string]*roleProcess{"indexer": idx, "executor": ex} {
		digest := map[string]string{"indexer": digestA, "executor": digestB}[name]
		info := regexp.MustCompile(`(?m)^mcpstream_policy_info\{digest="` + digest + `",role="` + name + `"\} 1$`)
		mismatch := regexp.MustCompile(`(?m)^mcpstream_policy_mismatch\{role="` + name + `"\} 1$`)
		var metrics string
		waitFor(t, name+"'s mcpstream_policy_mismatch 1", 200, func() bool {
			metrics = scrape(t, p.http)
			return mismatch.MatchString(metrics)
		})
		if !info.MatchString(metrics) {
			t.Errorf("%s: no %s in\n%s", name, info, grepLines(metrics, "mcpstream_policy"))
		}
		if !strings.Contains(p.errOut.String(), "policy check: MISMATCH") {
			t.Errorf("%s logged no mismatch warning:\n%s", name, p.errOut.String())
		}
	}
}

// Catalog replicas and executors (a workers-only one included) with the same policy, written
// differently: the check is ok, with or without --config, and no role reports a mismatch.
func TestPolicyCheckSamePolicyIsOK(t *testing.T) {
	checkPolicyOften(t)
	env := natstest.Start(t)
	cfgA, cfgA2 := writeConfig(t, "a.yaml", policyA), writeConfig(t, "a2.yaml", policyASameRules)
	digest := configDigest(t, cfgA)
	if d2 := configDigest(t, cfgA2); d2 != digest {
		t.Fatalf("the same policy written differently: digests %s and %s", digest, d2)
	}
	idx := startPolicyRole(t, env.URL, "indexer", "--config", cfgA, "--replica", "a")
	startPolicyRole(t, env.URL, "indexer", "--config", cfgA2, "--replica", "b")
	ex := startPolicyRole(t, env.URL, "executor", "--config", cfgA2, "--workers", "1", "--no-front-end")

	r, code, errOut := policyCheck(t, env.URL)
	if code != 0 || !r.Consistent || r.Mismatched != 0 || len(r.Digests) != 1 || r.Digests[digest] != 3 {
		t.Errorf("check: exit %d, report %+v; want exit 0, three instances with %s\n%s", code, r, digest, errOut)
	}
	if got := roleDigests(r); len(got[subjects.RoleIndexer]) != 2 || len(got[subjects.RoleExecutor]) != 1 {
		t.Errorf("instances %+v: want 2 replicas and the workers-only executor", r.Instances)
	}
	r, code, errOut = policyCheck(t, env.URL, "--config", cfgA2)
	if code != 0 || !r.Consistent || r.Expected != digest {
		t.Errorf("check --config: exit %d, report %+v\n%s", code, r, errOut)
	}

	// The roles' own checks see the others (peers) and no mismatch.
	for name, p := range map[string]*roleProcess{"indexer": idx, "executor": ex} {
		peers := regexp.MustCompile(`(?m)^mcpstream_policy_peers\{role="` + name + `"\} 2$`)
		var metrics string
		waitFor(t, name+"'s mcpstream_policy_peers 2", 200, func() bool {
			metrics = scrape(t, p.http)
			return peers.MatchString(metrics)
		})
		if !strings.Contains(metrics, `mcpstream_policy_mismatch{role="`+name+`"} 0`) {
			t.Errorf("%s reports a mismatch:\n%s", name, grepLines(metrics, "mcpstream_policy"))
		}
		if strings.Contains(p.errOut.String(), "MISMATCH") {
			t.Errorf("%s warned of a mismatch:\n%s", name, p.errOut.String())
		}
	}
}

// Nobody answering is not "ok": exit status 3, and a client answering junk on the discovery
// subjects is skipped, not taken for an instance.
func TestPolicyCheckNothingAnswers(t *testing.T) {
	env := natstest.Start(t)
	junk := []string{
		`not json`,
		`{"type":"io.nats.micro.v1.info_response","name":"mcpstream-registrysync","id":"x1","metadata":{}}`,
		`{"name":"mcpstream-catalog","metadata":{"policy.digest":"v1-abc"}}`, // no id
		strings.Repeat("x", maxPolicyReplyBytes+1),
	}
	sub, err := env.NC.Subscribe(subjects.SRVInfo(subjects.CatalogService), func(m *nats.Msg) {
		for _, j := range junk {
			env.NC.Publish(m.Reply, []byte(j))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	env.NC.Flush()
	r, code, errOut := policyCheck(t, env.URL)
	if code != 3 || r.Consistent || len(r.Instances) != 0 {
		t.Errorf("exit %d, report %+v; want exit 3 and no instance\n%s", code, r, errOut)
	}
	if !strings.Contains(errOut, "skipped 4 answer(s)") || !strings.Contains(errOut, "no catalog replica or executor answered") {
		t.Errorf("stderr: %q", errOut)
	}
}

// What other clients can put in $SRV answers is bounded and printable, and a digest that is not
// one is not compared.
func TestParsePolicyInfoHostile(t *testing.T) {
	good := policy.Open().Digest()
	for _, tt := range []struct {
		name, data string
		ok         bool
		want       policyInstance
	}{
		{"good", `{"type":"io.nats.micro.v1.info_response","name":"mcpstream-executor","id":"N1","metadata":{"role":"executor","instance":"h:1","policy.digest":"` + good + `"}}`,
			true, policyInstance{Role: "executor", Instance: "h:1", ID: "N1", Digest: good}},
		{"old catalog", `{"name":"mcpstream-catalog","id":"N2","metadata":{"replica":"0"}}`,
			true, policyInstance{Role: "indexer", Instance: "0", ID: "N2", Problem: "no policy digest advertised (mcpstream before policy digests?)"}},
		{"terminal escapes", `{"name":"mcpstream-catalog","id":"N3\u001b[2J","metadata":{"instance":"h\u001b]0;pwned\u0007","policy.digest":"v1-\u001b[31m"}}`,
			true, policyInstance{Role: "indexer", Instance: "h?]0;pwned?", ID: "N3?[2J", Problem: "malformed policy digest"}},
		{"role lie", `{"name":"mcpstream-executor","id":"N4","metadata":{"role":"indexer","policy.digest":"` + good + `"}}`,
			true, policyInstance{Role: "executor", ID: "N4", Digest: good, Problem: "advertises role indexer"}},
		{"other service", `{"name":"nats-other","id":"N5","metadata":{"policy.digest":"` + good + `"}}`, false, policyInstance{}},
		{"other type", `{"type":"io.nats.micro.v1.ping_response","name":"mcpstream-catalog","id":"N6"}`, false, policyInstance{}},
		{"array", `[1,2]`, false, policyInstance{}},
	} {
		got, ok := parsePolicyInfo([]byte(tt.data))
		if ok != tt.ok || ok && (got.Role != tt.want.Role || got.Instance != tt.want.Instance || got.ID != tt.want.ID ||
			got.Digest != tt.want.Digest || got.Problem != tt.want.Problem) {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	long := `{"name":"mcpstream-catalog","id":"N7","metadata":{"instance":"` + strings.Repeat("h", 10000) + `"}}`
	if got, ok := parsePolicyInfo([]byte(long)); !ok || len(got.Instance) > 128+len("…") {
		t.Errorf("long instance kept %d bytes (ok %v)", len(got.Instance), ok)
	}
}

// Ties without --config count every instance as differing: nobody is the majority.
func TestComparePolicies(t *testing.T) {
	a, b := "v1-"+strings.Repeat("a", 32), "v1-"+strings.Repeat("b", 32)
	in := func(d string) policyInstance { return policyInstance{Role: "executor", Digest: d} }
	for _, tt := range []struct {
		name       string
		insts      []policyInstance
		expected   string
		mismatched int
		consistent bool
	}{
		{"none", nil, "", 0, false},
		{"one", []policyInstance{in(a)}, "", 0, true},
		{"majority", []policyInstance{in(a), in(a), in(b)}, "", 1, false},
		{"tie", []policyInstance{in(a), in(b)}, "", 2, false},
		{"expected", []policyInstance{in(a), in(b), in(b)}, a, 2, false},
		{"expected all", []policyInstance{in(a), in(a)}, a, 0, true},
		{"unknown only", []policyInstance{in("")}, a, 0, false},
	} {
		r := comparePolicies(tt.insts, tt.expected)
		if r.Mismatched != tt.mismatched || r.Consistent != tt.consistent {
			t.Errorf("%s: mismatched %d, consistent %v; want %d, %v", tt.name, r.Mismatched, r.Consistent, tt.mismatched, tt.consistent)
		}
		if wantMajority := map[string]string{"majority": a}[tt.name]; r.Majority != wantMajority {
			t.Errorf("%s: majority %q, want %q", tt.name, r.Majority, wantMajority)
		}
	}
}

// `policy digest` prints what the roles advertise for the same file; without --config the open
// policy's.
func TestPolicyDigestCommand(t *testing.T) {
	cfgA := writeConfig(t, "a.yaml", policyA)
	out, errOut, err := catRun(t, "policy", "digest", "--config", cfgA, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var got struct {
		Digest string
		Open   bool
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Digest != configDigest(t, cfgA) || got.Open {
		t.Errorf("policy digest --json: %s (%v)", out, err)
	}
	out, _, err = catRun(t, "policy", "digest")
	if err != nil || !strings.HasPrefix(out, policy.Open().Digest()+" ") {
		t.Errorf("policy digest without --config: %q, %v; want the open policy's %s", out, err, policy.Open().Digest())
	}
	if _, errOut, err := catRun(t, "policy", "digest", "--config", writeConfig(t, "bad.yaml", "policy:\n")); err == nil {
		t.Errorf("an empty policy section was accepted: %s", errOut)
	}
	if _, errOut, err := catRun(t, "policy", "frobnicate"); err == nil || !strings.Contains(errOut, "check or digest") {
		t.Errorf("unknown subcommand: %v, %q", err, errOut)
	}
	if out, _, err := catRun(t, "help", "policy"); err != nil || !strings.Contains(out, "policy check") {
		t.Errorf("help policy: %v\n%s", err, out)
	}
	if out, _, err := catRun(t, "policy", "check", "--help"); err != nil || !strings.Contains(out, "--wait") {
		t.Errorf("policy check --help: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, []string{"policy", "check", "--wait", "0s"}, &syncBuffer{}, &syncBuffer{}); err == nil {
		t.Error("--wait 0s accepted")
	}
}

// The output of policy check is public (scripts read --json): golden files pin both forms.
func TestPolicyCheckOutputGolden(t *testing.T) {
	a, b := "v1-"+strings.Repeat("a", 32), "v1-"+strings.Repeat("b", 32)
	insts := []policyInstance{
		{Role: subjects.RoleExecutor, Instance: "exec-1:4242", ID: "NUID1", Digest: b},
		{Role: subjects.RoleExecutor, Instance: "exec-2:4243", ID: "NUID2", Problem: "no policy digest advertised (mcpstream before policy digests?)"},
		{Role: subjects.RoleIndexer, Instance: "idx-1:77/0", ID: "NUID3", Digest: a},
		{Role: subjects.RoleIndexer, Instance: "idx-2:78/1", ID: "NUID4", Digest: a},
	}
	for _, tt := range []struct {
		golden   string
		expected string
		json     bool
	}{
		{"policy_check.txt", "", false},
		{"policy_check_config.txt", a, false},
		{"policy_check_config.json", a, true},
	} {
		r := comparePolicies(slices.Clone(insts), tt.expected)
		if tt.expected != "" {
			r.ExpectedFrom = "mcpstream.yaml"
		}
		var out strings.Builder
		if err := writePolicyReport(&out, r, tt.json); err != nil {
			t.Fatal(err)
		}
		golden(t, tt.golden, out.String())
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestUpLogsAMismatchOnce: the catalog replica and the executor of one `up` see the same
// executor of another policy; the warning was logged by each of them, twice for one change. It
// is logged once; each role's metric still says it.
func TestUpLogsAMismatchOnce(t *testing.T) {
	checkPolicyOften(t)
	env := natstest.Start(t)
	cfgA, cfgB := writeConfig(t, "a.yaml", policyA), writeConfig(t, "b.yaml", policyB)
	up := startPolicyRole(t, env.URL, "up", "--config", cfgA)
	// (--replica: in this test process both executors would be host:pid, each taking the
	// other for itself)
	startPolicyRole(t, env.URL, "executor", "--config", cfgB, "--workers", "2", "--replica", "b")
	for _, role := range []string{"indexer", "executor"} {
		mismatch := regexp.MustCompile(`(?m)^mcpstream_policy_mismatch\{role="` + role + `"\} 1$`)
		waitFor(t, role+"'s mcpstream_policy_mismatch 1", 200, func() bool { return mismatch.MatchString(scrape(t, up.http)) })
	}
	// Both roles have checked since (a check every 100 ms): one warning for the one change.
	time.Sleep(500 * time.Millisecond)
	if n := strings.Count(up.errOut.String(), "policy check: MISMATCH"); n != 1 {
		t.Errorf("up logged the mismatch %d times, want once:\n%s", n, grepLines(up.errOut.String(), "policy check"))
	}
}

// "Could not check" is not "mismatch": NATS unreachable made policy check exit 1, as a
// mismatch does, so a script or a probe alerting on 1 took an outage for two policies. It exits
// 3, as when no instance answers (nothing was compared), with the connection error on stderr
// and nothing on stdout; the --config file it cannot read is the same. A bad --wait is a usage
// error (2).
func TestPolicyCheckCouldNotCheckIsNotMismatch(t *testing.T) {
	cfgA := writeConfig(t, "a.yaml", policyA)
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"NATS unreachable", "connect to NATS at nats://127.0.0.1:1", []string{"--nats", "nats://127.0.0.1:1"}},
		{"NATS unreachable, --config", "connect to NATS at nats://127.0.0.1:1", []string{"--nats", "nats://127.0.0.1:1", "--config", cfgA}},
		{"NATS unreachable, --json", "connect to NATS at nats://127.0.0.1:1", []string{"--nats", "nats://127.0.0.1:1", "--json"}},
		{"--config missing", "no-such.yaml", []string{"--nats", "nats://127.0.0.1:1", "--config", filepath.Join(t.TempDir(), "no-such.yaml")}},
	} {
		out, errOut, err := catRun(t, append([]string{"policy", "check"}, tt.args...)...)
		if err != exitCode(3) {
			t.Errorf("%s: %v, want exit status 3 (could not check)\n%s", tt.name, err, errOut)
		}
		if out != "" || !strings.Contains(errOut, "mcpstream policy check: could not check: ") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: stdout %q, stderr %q; want nothing on stdout and the reason on stderr", tt.name, out, errOut)
		}
	}
	for _, wait := range []string{"0s", "2m"} {
		if _, errOut, err := catRun(t, "policy", "check", "--nats", "nats://127.0.0.1:1", "--wait", wait); err != exitCode(2) || !strings.Contains(errOut, "--wait "+wait) {
			t.Errorf("--wait %s: %v, want exit status 2\n%s", wait, err, errOut)
		}
	}
}

// policy check --config FILE and policy digest --config FILE load the policy as the roles do, but
// said nothing of the patterns the roles warn about at load (policy.Warnings: the shape of an
// encoded public name, which matches no tool): the operator checking a configuration before
// rolling it out is the one to tell. The warnings go to stderr; stdout (the report, the digest)
// is unchanged.
func TestPolicyCheckConfigWarnings(t *testing.T) {
	env := natstest.Start(t)
	cfg := writeConfig(t, "enc.yaml", "servers: []\npolicy:\n  rules:\n    - name: \"no \\e[31mdeletes\"\n      allow: [\"*\"]\n      deny: [\"my_server___delete_all_1a2b3c4d5e\", \"files__rm*\"]\n")
	want := `rule 1 (no ?[31mdeletes): deny pattern "my_server___delete_all_1a2b3c4d5e": has the shape of an encoded public name`
	for _, args := range [][]string{
		{"policy", "check", "--nats", env.URL, "--wait", "100ms", "--config", cfg},
		{"policy", "check", "--nats", env.URL, "--wait", "100ms", "--config", cfg, "--json"},
		{"policy", "digest", "--config", cfg},
		{"policy", "digest", "--config", cfg, "--json"},
	} {
		out, errOut, err := catRun(t, args...)
		if args[1] == "digest" && err != nil || args[1] == "check" && err != exitCode(3) {
			t.Errorf("%v: %v\n%s", args, err, errOut)
		}
		prefix := "mcpstream " + args[0] + " " + args[1] + ": warning: " + cfg + ": policy: "
		if n := strings.Count(errOut, prefix+want); n != 1 {
			t.Errorf("%v: the warning is on stderr %d times, want once:\n%s", args, n, errOut)
		}
		if strings.Contains(errOut, "files__rm*") || strings.Contains(errOut, "\x1b") {
			t.Errorf("%v: warned about a pattern of original names, or printed a control character:\n%q", args, errOut)
		}
		if strings.Contains(out, "shape of an encoded") {
			t.Errorf("%v: the warning is on stdout:\n%s", args, out)
		}
	}
}
