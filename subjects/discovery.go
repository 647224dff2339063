package subjects

// Discovery of the processes that enforce the policy. Catalog replicas (CatalogService) and
// executors (ExecutorService) each run a nats.go micro service; a request on SRVInfo(service)
// is answered by every instance (not a queue group) with its micro.Info, whose metadata holds,
// besides each service's own keys, the PolicyInfo keys below. `mcpstream policy check` and the
// roles themselves compare the digests to find instances that enforce another policy.
//
// Executors also advertise MetaEnforcementDigest, the digest of the rest of what decides a call's
// answer (executor.Config.EnforcementDigest: limits, approval patterns, timeouts), which only
// executors have and compare among themselves. An instance of an older mcpstream lacks a key:
// its digest is unknown, never a mismatch.
//
// $SRV subjects carry no tenant: give them to operators and role processes only (a tenant's NATS
// user has no need of them). The digests are hashes (policy.Digest,
// executor.Config.EnforcementDigest): they name no rule, principal, tool or limit.
const (
	// ExecutorService is the micro service every executor process runs for discovery, with or
	// without a front end (it has no endpoints: calls go to ExecAll as before).
	ExecutorService = "mcpstream-executor"

	// Metadata keys of PolicyInfo.
	MetaRole         = "role"
	MetaInstance     = "instance"
	MetaPolicyDigest = "policy.digest"
	// MetaEnforcementDigest is an executor's enforcement digest (executors only).
	MetaEnforcementDigest = "executor.enforcement.digest"

	// Roles that enforce the policy (MetaRole).
	RoleIndexer  = "indexer"
	RoleExecutor = "executor"
)

// SRVInfo is the subject of the $SRV.INFO discovery request of every instance of a micro
// service.
func SRVInfo(service string) string { return "$SRV.INFO." + service }

// PolicyInfo is what an instance of a policy-enforcing role advertises in its service metadata.
type PolicyInfo struct {
	Role     string // RoleIndexer or RoleExecutor
	Instance string // host:pid (and /replica): unique per process and replica
	// PolicyDigest is policy.Policy.Digest of the policy the instance enforces.
	PolicyDigest string
	// EnforcementDigest is executor.Config.EnforcementDigest of an executor ("" for catalog
	// replicas, which enforce no limits).
	EnforcementDigest string
}

// Metadata returns p as micro service metadata (the MetaRole, MetaInstance and MetaPolicyDigest
// keys, and MetaEnforcementDigest when p has one), to be merged with a service's own.
func (p PolicyInfo) Metadata() map[string]string {
	md := map[string]string{MetaRole: p.Role, MetaInstance: p.Instance, MetaPolicyDigest: p.PolicyDigest}
	if p.EnforcementDigest != "" {
		md[MetaEnforcementDigest] = p.EnforcementDigest
	}
	return md
}

// PolicyInfoOf reads a PolicyInfo from micro service metadata (empty fields for missing keys:
// an older mcpstream advertises no digest, or no enforcement digest).
func PolicyInfoOf(md map[string]string) PolicyInfo {
	return PolicyInfo{Role: md[MetaRole], Instance: md[MetaInstance], PolicyDigest: md[MetaPolicyDigest],
		EnforcementDigest: md[MetaEnforcementDigest]}
}
