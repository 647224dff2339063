package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/policy"
)

// limitsConfig is the limits section of the configuration file: rate limits and concurrency caps
// the executor enforces across all its workers (every executor process shares them).
//
//	limits:
//	  tenant: {perSecond: 50, burst: 100, concurrency: 32}   # each tenant separately
//	  servers:
//	    "*": {perSecond: 20, burst: 40, concurrency: 8}      # every server without its own entry
//	    github: {perSecond: 5, burst: 10, concurrency: 4}
//	  tools:
//	    "github__create*": {perSecond: 1, burst: 2}          # each matching public name separately
type limitsConfig struct {
	// Tenant applies to each tenant separately.
	Tenant *rateConfig `yaml:"tenant"`
	// Servers maps a server name to its limit ("*" = every server without its own entry).
	Servers map[string]rateConfig `yaml:"servers"`
	// Tools maps a public-name glob pattern to a limit for each matching tool.
	Tools map[string]rateConfig `yaml:"tools"`
}

// rateConfig is one limit: a rate (burst calls per burst/perSecond seconds, sliding; without
// burst, ceil(perSecond) calls per window) and a cap on calls in flight. 0 = no limit.
type rateConfig struct {
	PerSecond   float64 `yaml:"perSecond"`
	Burst       int     `yaml:"burst"`
	Concurrency int     `yaml:"concurrency"`
}

// ErrLimits is wrapped by errors of the limits section.
var ErrLimits = errors.New("bad limits")

// limitError is one problem of the limits section: of its key field ("tenant", "servers.NAME",
// "tools.PATTERN"), so that the configuration error names that key and its line.
type limitError struct {
	field, msg string
}

func (e *limitError) Error() string { return ErrLimits.Error() + ": limits." + e.field + ": " + e.msg }

func (e *limitError) Unwrap() error { return ErrLimits }

func (r rateConfig) rate(field string) (executor.Rate, error) {
	bad := func(msg string) (executor.Rate, error) { return executor.Rate{}, &limitError{field, msg} }
	switch {
	case r.PerSecond < 0 || r.Burst < 0 || r.Concurrency < 0:
		return bad("perSecond, burst and concurrency must not be negative")
	case math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0):
		return bad("perSecond must be a finite number")
	case r.Burst > 0 && r.PerSecond == 0:
		return bad("burst needs perSecond")
	}
	return executor.Rate{PerSecond: r.PerSecond, Burst: r.Burst, Concurrency: r.Concurrency}, nil
}

// executorLimits converts the section (nil = no limits) for the executor. Its errors join
// limitErrors.
func (l *limitsConfig) executorLimits() (executor.Limits, error) {
	var out executor.Limits
	if l == nil {
		return out, nil
	}
	var errs []error
	if l.Tenant != nil {
		r, err := l.Tenant.rate("tenant")
		errs = append(errs, err)
		out.Tenant = r
	}
	conv := func(section string, in map[string]rateConfig) map[string]executor.Rate {
		if len(in) == 0 {
			return nil
		}
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := make(map[string]executor.Rate, len(in))
		for _, k := range keys {
			field := section + "." + k
			if k == "" {
				errs = append(errs, &limitError{field, "empty name"})
				continue
			}
			if section == "tools" && policy.NoToolPart(k) {
				// Compared with the whole public name server__tool, which always holds "__": a
				// limit that silently applies to nothing.
				errs = append(errs, &limitError{field, fmt.Sprintf(`%q matches no tool: patterns are server__tool (%q: every tool of server %s)`, k, k+"__*", k)})
				continue
			}
			if section == "tools" && !policy.ValidPattern(k) {
				errs = append(errs, &limitError{field, fmt.Sprintf("%q is not a valid glob pattern", k)})
				continue
			}
			r, err := in[k].rate(field)
			errs = append(errs, err)
			m[k] = r
		}
		return m
	}
	out.Servers = conv("servers", l.Servers)
	out.Tools = conv("tools", l.Tools)
	return out, errors.Join(errs...)
}

// unknownServers lists the limits that can apply to no server of servers (the configuration's,
// non-empty): a limits.servers name that is not one of them, a limits.tools pattern whose server
// part matches none of them. Each as "limits.servers.NAME" or "limits.tools.PATTERN", sorted.
// Such a limit is kept (a server of that name may register later, from another registrysync's
// configuration), but it is most likely a typo: the executor role warns about it.
func (l *limitsConfig) unknownServers(servers []string) []string {
	if l == nil || len(servers) == 0 {
		return nil
	}
	var out []string
	for name := range l.Servers {
		if name != "*" && !slices.Contains(servers, name) {
			out = append(out, "limits.servers."+name)
		}
	}
	for pat := range l.Tools {
		sp, _, ok := strings.Cut(pat, "__")
		if !ok || pat == "*" {
			continue // a pattern over the whole public name: any server may match it
		}
		if !slices.ContainsFunc(servers, func(s string) bool { return policy.Match(sp, s) || policy.Match(sp+"_", s) }) {
			out = append(out, "limits.tools."+pat)
		}
	}
	sort.Strings(out)
	return out
}
