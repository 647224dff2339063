package policy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/subjects"
)

// Errors.
var (
	ErrInvalid          = errors.New("invalid policy")
	ErrUnknownPrincipal = errors.New("unknown principal")
)

// Config is the policy section of the configuration file.
type Config struct {
	// Principals, when not empty, is the closed list of users who may act; a request for anyone
	// else is refused with unknown_principal. Their tenant and roles come from here, not from
	// the request. A key is a user name (its tenant in PrincipalConfig.Tenant, the local one
	// without), or "tenant/user": the same user name may then be configured in several tenants
	// ("acme/admin", "beta/admin"), each with its own roles.
	Principals map[string]PrincipalConfig `yaml:"principals" json:"principals,omitempty"`
	Rules      []Rule                     `yaml:"rules" json:"rules,omitempty"`
	// ApproveDestructive makes every tool annotated destructiveHint:true need approval;
	// nil means true.
	ApproveDestructive *bool `yaml:"approveDestructive" json:"approveDestructive,omitempty"`
}

// PrincipalConfig describes one known user. Without a tenant, the user is the local tenant's.
type PrincipalConfig struct {
	Tenant string   `yaml:"tenant" json:"tenant,omitempty"`
	Roles  []string `yaml:"roles" json:"roles,omitempty"`
}

// Rule grants or denies tools to principals. Tenants, Users and Roles are exact names or "*";
// Users are user names ("tenant/user" is refused: a user of one tenant is Tenants and Users).
type Rule struct {
	Name    string   `yaml:"name" json:"name,omitempty"`
	Tenants []string `yaml:"tenants" json:"tenants,omitempty"`
	Users   []string `yaml:"users" json:"users,omitempty"`
	Roles   []string `yaml:"roles" json:"roles,omitempty"`
	Allow   []string `yaml:"allow" json:"allow,omitempty"`
	Deny    []string `yaml:"deny" json:"deny,omitempty"`
	// Approve lists tools that need a human approval before each call.
	Approve []string `yaml:"approve" json:"approve,omitempty"`
}

// Local is the principal of the open policy and the CLI's default.
var Local = subjects.Principal{Tenant: "local", User: "local"}

// Policy is a compiled, immutable policy.
type Policy struct {
	open bool
	// principals are the configured principals by (tenant, user), their tenant resolved (a
	// "tenant/user" key's, or PrincipalConfig.Tenant, or the local tenant); userTenants lists
	// the tenants each user name is configured in.
	principals         map[tenantUser]PrincipalConfig
	userTenants        map[string][]string
	rules              []Rule
	approveDestructive bool
	// The tenants, users and roles some rule names (see Class).
	namedTenants, namedUsers, namedRoles map[string]bool
	// digest is Digest, computed once by Open and New.
	digest string
}

// Open returns the policy of a configuration without a policy section.
func Open() *Policy {
	p := &Policy{open: true, approveDestructive: true}
	p.digest = digestOf(p)
	return p
}

// New compiles cfg; a nil cfg gives Open(). A configuration it refuses gets an *Error that lists
// every problem found (at most MaxProblems, and how many more), each an ErrInvalid *Problem
// that says where it is: a user fixing a file sees them all at once, not one per run.
func New(cfg *Config) (*Policy, error) {
	if cfg == nil {
		return Open(), nil
	}
	p := &Policy{rules: cfg.Rules, approveDestructive: true}
	if cfg.ApproveDestructive != nil {
		p.approveDestructive = *cfg.ApproveDestructive
	}
	var ps problems
	if len(cfg.Principals) > 0 {
		p.principals, p.userTenants = compilePrincipals(cfg.Principals, &ps)
	}
	for i, r := range cfg.Rules {
		checkRule(i+1, r, &ps)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	p.namedTenants, p.namedUsers, p.namedRoles = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range cfg.Rules {
		for _, n := range r.Tenants {
			p.namedTenants[n] = true
		}
		for _, n := range r.Users {
			p.namedUsers[n] = true
		}
		for _, n := range r.Roles {
			p.namedRoles[n] = true
		}
	}
	p.digest = digestOf(p)
	return p, nil
}

// compilePrincipals resolves the principals by (tenant, user) and lists the tenants of each
// user name, adding the problems of their keys to ps. Keys are taken in sorted order, so that
// the problems come in the same order, naming the same keys, every time.
func compilePrincipals(cfg map[string]PrincipalConfig, ps *problems) (map[tenantUser]PrincipalConfig, map[string][]string) {
	principals, userTenants := map[tenantUser]PrincipalConfig{}, map[string][]string{}
	keyOf := map[tenantUser]string{}
	for _, key := range slices.Sorted(maps.Keys(cfg)) {
		pc := cfg[key]
		bad := func(code, field string, item int, format string, args ...any) {
			ps.add(&Problem{Code: code, Principal: key, Field: field, Item: item, Msg: fmt.Sprintf(format, args...)})
		}
		if !principalUTF8(key, pc, bad) {
			continue
		}
		if key == "" {
			bad(CodeEmptyPrincipal, "", 0, "a principal has an empty name")
			continue
		}
		tu := tenantUser{tenant: cmp.Or(pc.Tenant, Local.Tenant), user: key}
		if t, u, ok := strings.Cut(key, "/"); ok {
			switch {
			case t == "" || u == "" || strings.Contains(u, "/"):
				bad(CodeBadPrincipalKey, "", 0, "principal %q: want a user name, or tenant/user", shown(key))
				continue
			case pc.Tenant != "" && pc.Tenant != t:
				bad(CodeTenantMismatch, "tenant", 0, "principal %q has tenant %q: the key names tenant %q", shown(key), shown(pc.Tenant), shown(t))
				continue
			}
			tu = tenantUser{tenant: t, user: u}
		}
		if other, dup := keyOf[tu]; dup {
			bad(CodeDuplicatePrincipal, "", 0, "principals %q and %q: user %q of tenant %q is configured twice",
				shown(other), shown(key), shown(tu.user), shown(tu.tenant))
			continue
		}
		keyOf[tu] = key
		pc.Tenant = tu.tenant
		principals[tu] = pc
		userTenants[tu.user] = append(userTenants[tu.user], tu.tenant)
	}
	return principals, userTenants
}

// principalUTF8 reports whether principal key's name, tenant and roles are all UTF-8, and
// reports each that is not with bad (see notUTF8).
func principalUTF8(key string, pc PrincipalConfig, bad func(code, field string, item int, format string, args ...any)) bool {
	ok := true
	if !utf8.ValidString(key) {
		bad(CodeNotUTF8, "", 0, "principal %q %s", shown(key), notUTF8)
		ok = false
	}
	if !utf8.ValidString(pc.Tenant) {
		bad(CodeNotUTF8, "tenant", 0, "principal %q: tenant %q %s", shown(key), shown(pc.Tenant), notUTF8)
		ok = false
	}
	for j, role := range pc.Roles {
		if !utf8.ValidString(role) {
			bad(CodeNotUTF8, "roles", j+1, "principal %q: role %q %s", shown(key), shown(role), notUTF8)
			ok = false
		}
	}
	return ok
}

// notUTF8 ends the message of a configuration string that is not UTF-8 (YAML's !!binary decodes
// into one as raw bytes). Tool, server, user and role names reach the policy as JSON, which holds
// none, so such a pattern or name would match nothing (a deny so written would silently deny
// nothing); and Digest, hashing JSON, would write the bytes as U+FFFD: policies that decide
// apart would share a digest.
const notUTF8 = "is not valid UTF-8 (names and patterns are text)"

// checkRule adds the problems of rule i (from 1) to ps: at most one for each entry of its lists.
func checkRule(i int, r Rule, ps *problems) {
	place := rulePlace(i, r.Name)
	bad := func(code, field string, item int, format string, args ...any) {
		ps.add(&Problem{Code: code, Rule: i, RuleName: r.Name, Field: field, Item: item, Msg: place + ": " + fmt.Sprintf(format, args...)})
	}
	if !utf8.ValidString(r.Name) {
		ps.add(&Problem{Code: CodeNotUTF8, Rule: i, RuleName: r.Name, Field: "name",
			Msg: fmt.Sprintf("rule %d: name %q %s", i, shown(r.Name), notUTF8)})
	}
	for _, who := range []struct {
		field string
		names []string
	}{{"tenants", r.Tenants}, {"users", r.Users}, {"roles", r.Roles}} {
		for j, n := range who.names {
			switch {
			case !utf8.ValidString(n):
				bad(CodeNotUTF8, who.field, j+1, "%s entry %q %s", who.field, shown(n), notUTF8)
			case n == "" || n != "*" && strings.ContainsAny(n, "*?[\\"):
				// Names are matched exactly: a glob here ("contractor-*") would never match,
				// and a deny written with one would silently fail open.
				bad(CodeNameNotExact, who.field, j+1, `%s entry %q: names are exact, or "*" for any (globs are for tools)`, who.field, shown(n))
			case who.field == "users" && strings.Contains(n, "/"):
				// A user name holds no "/": a principal's "tenant/user" key (and --principal)
				// is a tenant and a user, so a rule naming one would apply to nobody, and a
				// deny written so would silently fail open.
				t, u, _ := strings.Cut(n, "/")
				t, u = shown(t), shown(u)
				bad(CodeUserWithTenant, who.field, j+1, "users entry %q: users are user names; for user %q of tenant %q write tenants: [%q], users: [%q]",
					shown(n), u, t, t, u)
			}
		}
	}
	for _, list := range []struct {
		field    string
		patterns []string
	}{{"allow", r.Allow}, {"deny", r.Deny}, {"approve", r.Approve}} {
		for j, pat := range list.patterns {
			switch {
			case !utf8.ValidString(pat):
				bad(CodeNotUTF8, list.field, j+1, "%s entry %q %s", list.field, shown(pat), notUTF8)
			case pat == "":
				bad(CodeEmptyPattern, list.field, j+1, `empty pattern: patterns are server__tool globs such as "github__*"`)
			case NoToolPart(pat):
				bad(CodeNoToolPart, list.field, j+1, `pattern %q matches no tool: patterns are server__tool (%q: every tool of server %s)`, shown(pat), shown(pat)+"__*", shown(pat))
			case emptyPart(pat):
				bad(CodeEmptyPart, list.field, j+1, `pattern %q matches no tool: its server or tool part is empty (%q: every tool of a server)`, shown(pat), "server__*")
			case !ValidPattern(pat):
				bad(CodeBadPattern, list.field, j+1, "bad pattern %q", shown(pat))
			}
		}
	}
}

// Class returns a key that two principals share exactly when every rule applies to both or to
// neither, so that the policy decides every tool alike for them: their tenant, user and roles
// reduced to those some rule names (a name no rule names is "~", as any other). "" for the
// open policy. A cache by principal keyed with it holds one entry per class of principals, not
// one per name a client makes up.
func (p *Policy) Class(pr subjects.Principal) string {
	if p.open {
		return ""
	}
	named := func(set map[string]bool, n string) string {
		if set[n] {
			return strconv.Quote(n)
		}
		return "~"
	}
	var roles []string
	for _, r := range pr.Roles {
		if p.namedRoles[r] {
			roles = append(roles, strconv.Quote(r))
		}
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)
	return named(p.namedTenants, pr.Tenant) + " " + named(p.namedUsers, pr.User) + " " + strings.Join(roles, ",")
}

// IsOpen reports whether this is the open policy.
func (p *Policy) IsOpen() bool { return p.open }

// Resolve checks that a principal may act at all and returns it as the policy sees it (tenant and
// roles from the configuration when principals are listed; a principal without a tenant is the
// local tenant's). The result's tenant may differ from pr's: a configured user asked for as of the
// local tenant gets its own, so callers that pin a tenant (the subject's) compare it.
func (p *Policy) Resolve(pr subjects.Principal) (subjects.Principal, error) {
	if pr.User == "" {
		if p.open {
			pr.User = Local.User
		} else {
			return pr, fmt.Errorf("%w: no user given", ErrUnknownPrincipal)
		}
	}
	if pr.Tenant == "" {
		pr.Tenant = Local.Tenant
	}
	if p.open || len(p.principals) == 0 {
		return pr, nil
	}
	// A principal configured without a tenant is the local tenant's: before, it acted in
	// whatever tenant's subject carried it, with the roles configured for it.
	pc, ok := p.principals[tenantUser{pr.Tenant, pr.User}]
	if !ok && pr.Tenant == Local.Tenant {
		// Asked for as of the local tenant (the CLI's default), a user configured in exactly
		// one other tenant is that tenant's (callers that pin a tenant compare it); one
		// configured in several is nobody's in particular.
		if ts := p.userTenants[pr.User]; len(ts) == 1 {
			pc, ok = p.principals[tenantUser{ts[0], pr.User}]
		}
	}
	if !ok {
		return pr, NotInTenant(pr.User, pr.Tenant)
	}
	pr.Tenant = pc.Tenant
	pr.Roles = slices.Clone(pc.Roles)
	return pr, nil
}

// tenantUser is a configured principal's key: its tenant and user name.
type tenantUser struct{ tenant, user string }

// NotInTenant is the ErrUnknownPrincipal of user asked for in tenant: the same words whether
// nobody configures the name or another tenant does, so that a client of one tenant cannot
// tell which names are another tenant's users. Callers that pin a tenant and get another one
// from Resolve (see Resolve) refuse with it too.
func NotInTenant(user, tenant string) error {
	return fmt.Errorf("%w: %q is not a principal of tenant %q (a user of another tenant sends on that tenant's subjects)", ErrUnknownPrincipal, user, tenant)
}

// Tool is what a decision needs to know about a tool.
type Tool struct {
	Server      string // original server name
	Name        string // original tool name
	Destructive bool   // annotations.destructiveHint
}

// Decision is the outcome of Decide.
type Decision struct {
	Allowed       bool
	NeedsApproval bool
	// Why names the rule (or the default) that decided.
	Why string
}

// Decide says whether principal pr (already resolved) may call t. It is the one code path for
// search filtering, details and execution.
func (p *Policy) Decide(pr subjects.Principal, t Tool) Decision {
	if p.open {
		return Decision{Allowed: true, NeedsApproval: p.approveDestructive && t.Destructive, Why: "open policy"}
	}
	d := Decision{Why: "no rule allows it"}
	for i, r := range p.rules {
		if !r.applies(pr) {
			continue
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("rule %d", i+1)
		}
		if matchTool(r.Deny, t) {
			return Decision{Why: "denied by " + name}
		}
		if matchTool(r.Allow, t) && !d.Allowed {
			d.Allowed, d.Why = true, "allowed by "+name
		}
		if matchTool(r.Approve, t) {
			d.NeedsApproval = true
		}
	}
	if !d.Allowed {
		d.NeedsApproval = false
		return d
	}
	if p.approveDestructive && t.Destructive {
		d.NeedsApproval = true
	}
	return d
}

func (r Rule) applies(pr subjects.Principal) bool {
	if len(r.Tenants) > 0 && !slices.Contains(r.Tenants, pr.Tenant) && !slices.Contains(r.Tenants, "*") {
		return false
	}
	if len(r.Users) > 0 && !slices.Contains(r.Users, pr.User) && !slices.Contains(r.Users, "*") {
		return false
	}
	if len(r.Roles) > 0 && !slices.ContainsFunc(pr.Roles, func(role string) bool { return slices.Contains(r.Roles, role) }) && !slices.Contains(r.Roles, "*") {
		return false
	}
	return true
}

// matchTool reports whether a server__tool pattern matches t: the part before the pattern's first
// "__" matches the server name, the rest the tool name, so "kb__*" never matches a tool of a
// server "kb__admin", and "a__b__*" matches the tools "b__..." of server "a" (tool names, which
// servers choose, may hold "__"; configured server names may not). A pattern without "__"
// matches server + "__" + tool as a whole ("*").
func matchTool(patterns []string, t Tool) bool {
	for _, pat := range patterns {
		if MatchTool(pat, t.Server, t.Name) {
			return true
		}
	}
	return false
}

// MatchTool reports whether the server__tool glob pattern pat matches the tool named name on
// server (original names): the part before pat's first "__" matches the server, the rest the
// tool; a pattern without "__" matches server + "__" + name as a whole. A server name may end
// in "_" (it never holds "__"), so a "___" there also splits after its first "_": "files___rm*"
// matches the tools "rm..." of server "files_", as their public names read, and the tools
// "_rm..." of server "files". Policy rules, the executor's limits and its approval patterns all
// match this way.
func MatchTool(pat, server, name string) bool {
	if pat == "*" {
		return true
	}
	sp, tp, ok := strings.Cut(pat, "__")
	if !ok {
		return Match(pat, server+"__"+name)
	}
	if Match(sp, server) && Match(tp, name) {
		return true
	}
	return strings.HasPrefix(tp, "_") && strings.HasSuffix(server, "_") && Match(sp+"_", server) && Match(tp[1:], name)
}

// NoToolPart reports whether pat has neither "__" nor a glob character: MatchTool compares it
// with the whole server__tool name, which always holds "__", so it matches nothing ("github"
// meant "github__*"). A deny written so would silently deny nothing.
func NoToolPart(pat string) bool {
	return !strings.Contains(pat, "__") && !strings.ContainsAny(pat, "*?[\\")
}

// emptyPart reports whether pat's server or tool part (before and after its first "__") is
// empty so that it matches nothing: no tool has an empty name, nor any server ("github__"
// meant "github__*"). "___x" still matches the tools "x" of a server "_" (see MatchTool).
func emptyPart(pat string) bool {
	sp, tp, ok := strings.Cut(pat, "__")
	return ok && (tp == "" || sp == "" && !strings.HasPrefix(tp, "_"))
}

// ValidPattern reports whether pat is a server__tool pattern MatchTool can use: not empty, not
// NoToolPart, without an empty server or tool part, and a valid glob both as a whole and in
// each part MatchTool matches on its own (the parts before and after the first "__"), so that
// it never silently matches nothing ("[a__b]", `x\__y`, "github", "github__").
func ValidPattern(pat string) bool {
	if pat == "" || NoToolPart(pat) || emptyPart(pat) {
		return false
	}
	parts := []string{pat}
	if sp, tp, ok := strings.Cut(pat, "__"); ok {
		parts = append(parts, sp, tp)
	}
	for _, p := range parts {
		if _, err := glob(p, ""); err != nil {
			return false
		}
	}
	return true
}

// Match reports whether glob pattern pat ('*' any run, '?' one character, [..] a class)
// matches s. Unlike path.Match, '*' and '?' also match '/' (see glob).
func Match(pat, s string) bool {
	// The shapes nearly every policy uses, without path.Match: it runs for every tool a search
	// or a call checks, per rule.
	switch meta := strings.IndexAny(pat, "*?[\\"); {
	case meta < 0:
		return pat == s
	case pat == "*":
		return true
	case meta == len(pat)-1 && pat[meta] == '*': // "prefix*"
		return strings.HasPrefix(s, pat[:meta])
	case meta == 0 && pat[0] == '*' && !strings.ContainsAny(pat[1:], "*?[\\"): // "*suffix"
		return strings.HasSuffix(s, pat[1:])
	}
	ok, err := glob(pat, s)
	return err == nil && ok
}

// MayUseScope reports whether principal pr may see a list the server marked cacheScope private,
// listed under authContext ("tenant:T", "user:U", "tenant:T/user:U", or "" for the host's own).
// A scope other than "" or public is private (subjects.NormalScope), whoever stored it: a
// catalog written before snapshots were normalized when decoded may hold "Private".
func (p *Policy) MayUseScope(pr subjects.Principal, cacheScope, authContext string) bool {
	if subjects.NormalScope(cacheScope) != subjects.ScopePrivate {
		return true
	}
	if authContext == "" {
		return pr.User == Local.User && pr.Tenant == Local.Tenant
	}
	for _, part := range strings.Split(authContext, "/") {
		k, v, _ := strings.Cut(part, ":")
		switch k {
		case "tenant":
			if pr.Tenant != v {
				return false
			}
		case "user":
			if pr.User != v {
				return false
			}
		default:
			return false
		}
	}
	return true
}
