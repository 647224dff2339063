// Package policy decides what a principal may do: the one policy that search, details, tool lists,
// Code Mode stubs and the executor all apply, through the same code path (Decide).
//
// Without a configuration (the embedded default) the policy is open: one local principal may use
// everything, and tools annotated destructive still need approval. Once a configuration exists,
// what it does not allow is denied.
//
// Principals, when listed, are keyed by user name (with the tenant in their entry, the local one
// without) or by "tenant/user", so that one user name may be configured in several tenants with
// roles of its own in each; a request is resolved in the tenant it comes from (its subject's).
//
// Rules match a principal by tenant, user and role (empty lists match anyone) and tools by glob
// patterns over "server__tool" written with the ORIGINAL server and tool names ('*' matches any
// run of characters, including none, '?' one character, [..] a class, [^..] its negation, '\'
// escapes; '/' is a character like any other). A deny in any matching rule wins over every
// allow. A rule's users are user names: one of a tenant is tenants: [T], users: [U] ("T/U" there is refused).
// Names and patterns are UTF-8 text, as the names they are compared with always are (they come
// as JSON): a configuration string that is not (YAML's !!binary) is refused. A pattern with the
// exact shape of an encoded public name (subjects.LooksEncoded), copied from search output, is
// accepted (an original name may have it) but listed by Warnings, which the roles log at load,
// as are a glob without "__" that can match no server__tool name and a class "[!..]" (a class
// holding '!', not the shell's negation).
// New reports every problem of a configuration it refuses (the first MaxProblems, and how many
// more), each a *Problem with a stable code and its place (principal, or rule, field and item),
// for the configuration loader to point at the lines they are written on.
//
// Digest is a stable hash of the effective policy (its normalized principals and rules, not the
// configuration's text): processes that must enforce the same policy advertise it, so that one
// that loaded another configuration shows (`mcpstream policy check`). The open policy has a digest
// of its own. It covers the policy only: what else executors decide by (limits, approval
// patterns, timeouts) has a digest of its own, executor.Config.EnforcementDigest.
//
// The package holds no I/O; a Policy is immutable and safe for concurrent use.
package policy
