package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
)

// digestVersion is the version of the canonical form Digest hashes, and the prefix of every
// digest ("v1-..."): a later mcpstream that normalizes otherwise gives its digests another
// prefix, so that a check tells "another canonical form" from "another policy".
const digestVersion = 1

// DigestPattern matches every digest Digest returns (and nothing longer): "v1-" and 32 lower-case
// hex digits. Code that reads digests other processes advertise checks them against it.
var DigestPattern = regexp.MustCompile(`^v[1-9][0-9]{0,3}-[0-9a-f]{32}$`)

// canonical is the normalized form of a policy that Digest hashes: what the policy decides and
// nothing of how the configuration file wrote it.
type canonical struct {
	V                  int                  `json:"v"`
	Open               bool                 `json:"open"`
	ApproveDestructive bool                 `json:"approveDestructive"`
	Principals         []canonicalPrincipal `json:"principals"`
	Rules              []canonicalRule      `json:"rules"`
}

type canonicalPrincipal struct {
	Name   string   `json:"name"`
	Tenant string   `json:"tenant"`
	Roles  []string `json:"roles"`
}

type canonicalRule struct {
	Name    string   `json:"name"`
	Tenants []string `json:"tenants"`
	Users   []string `json:"users"`
	Roles   []string `json:"roles"`
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
	Approve []string `json:"approve"`
}

// Digest is a stable, short hash of the effective policy: "v1-" and 32 hex digits (the first 128
// bits of a SHA-256). Two policies that decide alike get the same digest however their
// configuration was written — key and map order, whitespace, YAML or JSON style, the order and
// repetitions within a rule's lists, a principal's roles, a principal's tenant left out or given
// as "local", approveDestructive left out or given as true — and any change of a rule, a
// principal or approveDestructive changes it. The order of the rules counts (it decides which
// rule a decision names), and so do rule names. The open policy (no policy section) has a digest
// of its own, distinct from every configured policy's, "policy: {rules: []}" (deny everything)
// included.
//
// Processes that must enforce the same policy (catalog replicas and executors) advertise it so
// that a mismatch shows. It reveals no rule, principal or tool name; but it is an unkeyed hash,
// so whoever can guess a whole policy (the open one, say) can confirm the guess.
func (p *Policy) Digest() string {
	if p.digest != "" {
		return p.digest
	}
	return digestOf(p)
}

func digestOf(p *Policy) string {
	c := canonical{V: digestVersion, Open: p.open, ApproveDestructive: p.approveDestructive}
	for tu, pc := range p.principals {
		c.Principals = append(c.Principals, canonicalPrincipal{Name: tu.user, Tenant: tu.tenant, Roles: set(pc.Roles)})
	}
	// By name, then tenant: a policy whose user names are all distinct (every policy before
	// "tenant/user" keys) keeps its digest; "acme/alice" and alice with tenant acme are one.
	slices.SortFunc(c.Principals, func(a, b canonicalPrincipal) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Tenant, b.Tenant))
	})
	for _, r := range p.rules {
		c.Rules = append(c.Rules, canonicalRule{Name: r.Name, Tenants: set(r.Tenants), Users: set(r.Users), Roles: set(r.Roles),
			Allow: set(r.Allow), Deny: set(r.Deny), Approve: set(r.Approve)})
	}
	// Marshalling these types (strings, bools, slices; no maps, no floats) cannot fail, and
	// its output is deterministic.
	data, err := json.Marshal(c)
	if err != nil {
		panic("policy: digest: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return "v" + strconv.Itoa(digestVersion) + "-" + hex.EncodeToString(sum[:16])
}

// set returns names sorted without repetitions (nil for none): every list of a rule or a
// principal is matched as a set.
func set(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	s := slices.Clone(names)
	slices.Sort(s)
	return slices.Compact(s)
}
