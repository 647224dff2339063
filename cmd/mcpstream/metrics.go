package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// GET /metrics serves the Prometheus text format: the Go runtime and the process, and the
// counters of each role the process runs, read from its Stats at scrape time (the packages keep
// their own counters and know nothing of Prometheus).

// newMetrics returns the process's registry and its /metrics handler.
func newMetrics() (*prometheus.Registry, http.Handler) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// collectFunc is a collector whose metrics are read when scraped (an unchecked collector: it
// describes nothing up front).
type collectFunc func(ch chan<- prometheus.Metric)

func (f collectFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// addMetrics registers collect with the process's registry; without HTTP there is none.
func (env *roleEnv) addMetrics(collect collectFunc) {
	if env.Metrics != nil {
		env.Metrics.MustRegister(collect)
	}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var natsConnected = desc("mcpstream_nats_connected", "1 while the process is connected to NATS; its roles serve nothing while it is 0.")

var (
	execReady      = desc("mcpstream_executor_ready", "1 once the executor serves (registry replayed, front end and workers running).")
	execHandled    = desc("mcpstream_executor_calls_handled_total", "Call messages taken from the calls stream by this process.")
	execAnswered   = desc("mcpstream_executor_calls_answered_total", "Terminal answers stored by this process.")
	execRefused    = desc("mcpstream_executor_calls_refused_total", "Answers with status refused (refused before dispatch).")
	execFailed     = desc("mcpstream_executor_calls_failed_total", "Answers with status failed (protocol or transport failure, outcome unknown).")
	execToolErrors = desc("mcpstream_executor_tool_errors_total", "Answers with status ok whose result says isError: true.")
	execSeconds    = desc("mcpstream_executor_call_seconds_total", "Total time from a worker taking a call to its answer stored, approval waits included (divide by calls_answered_total).")
	execDispatched = desc("mcpstream_executor_dispatches_total", "tools/call attempts sent to a connector.")
	auditFailed    = desc("mcpstream_executor_audit_publish_failures_total", "Audit publishes that failed or were not acknowledged in time (each is published again).")
	auditDropped   = desc("mcpstream_executor_audit_events_dropped_total", "Audit events given up (retry queue full, or not stored before the executor stopped).")
	execRegSeq     = desc("mcpstream_executor_registry_sequence", "Last registry stream sequence the executor applied (its view of freshness).")
	execRegLag     = desc("mcpstream_executor_registry_lag", "Registry messages the executor has not applied yet: while it grows, refusals of stale tools come late.")
)

// executorMetrics are the counters of an executor.
func executorMetrics(ex *executor.Executor) collectFunc {
	return func(ch chan<- prometheus.Metric) {
		st := ex.Stats()
		gauge(ch, execReady, boolValue(ex.Ready()))
		counter(ch, execHandled, float64(st.Handled))
		counter(ch, execAnswered, float64(st.Answered))
		counter(ch, execRefused, float64(st.Refused))
		counter(ch, execFailed, float64(st.Failed))
		counter(ch, execToolErrors, float64(st.ToolErrors))
		counter(ch, execSeconds, st.Seconds)
		counter(ch, execDispatched, float64(st.Dispatched))
		counter(ch, auditFailed, float64(st.AuditFailed))
		counter(ch, auditDropped, float64(st.AuditDropped))
		gauge(ch, execRegSeq, float64(st.RegistrySeq))
		gauge(ch, execRegLag, float64(st.RegistryLag))
	}
}

var (
	catReady          = desc("mcpstream_catalog_ready", "1 once the replica has caught up with the registry stream and serves.", "replica")
	catSeq            = desc("mcpstream_catalog_sequence", "Last registry stream sequence applied.", "replica")
	catStreamSeq      = desc("mcpstream_catalog_stream_sequence", "The registry stream's last sequence as the replica last saw it (each message taken, and the stream's info every 5 s).", "replica")
	catLag            = desc("mcpstream_catalog_lag", "Registry messages the replica has not applied yet (stream_sequence - sequence, less those deleted before it read them): grows while it falls behind or is stuck.", "replica")
	catApplied        = desc("mcpstream_catalog_applied_total", "Registry messages applied since the replica opened.", "replica")
	catBadEvents      = desc("mcpstream_catalog_bad_events_total", "Malformed registry messages skipped.", "replica")
	catCollisions     = desc("mcpstream_catalog_name_collisions_total", "Public names refused because another (server, tool) pair holds them.", "replica")
	catBadItems       = desc("mcpstream_catalog_bad_definitions_total", "Definitions without a usable name, or duplicated, skipped.", "replica")
	catTools          = desc("mcpstream_catalog_tools", "Tools in the catalog.", "replica")
	catServers        = desc("mcpstream_catalog_servers", "Servers known to the catalog (not removed).", "replica")
	catVectors        = desc("mcpstream_catalog_vectors", "Tools with an embedding (hybrid search).", "replica")
	catVectorsPending = desc("mcpstream_catalog_vectors_pending", "Tools waiting for an embedding.", "replica")
	catEmbedErrors    = desc("mcpstream_catalog_embed_errors_total", "Failed embeddings endpoint calls.", "replica")
	catBadVectors     = desc("mcpstream_catalog_bad_vectors_total", "Embeddings the index refused (zero, non-finite, another dimension).", "replica")
	catVlogBytes      = desc("mcpstream_catalog_value_log_bytes", "Size of the replica's Badger value log files (the active one at its preallocated size); 0 in memory.", "replica")
	catVlogRewrites   = desc("mcpstream_catalog_value_log_gc_rewrites_total", "Value log files the garbage collection rewrote (and deleted) since the replica opened.", "replica")
	catRequests       = desc("mcpstream_catalog_requests_total", "Catalog service requests answered, by endpoint (search, details, servers).", "replica", "endpoint")
	catErrors         = desc("mcpstream_catalog_request_errors_total", "Catalog service requests answered with an error code, by endpoint.", "replica", "endpoint")
	catSeconds        = desc("mcpstream_catalog_request_seconds_total", "Total time from taking a request to its reply being ready to send, by endpoint (divide by requests_total).", "replica", "endpoint")
)

// catalogMetrics are the counters of a catalog replica.
func catalogMetrics(cat *indexer.Catalog, replica string) collectFunc {
	return func(ch chan<- prometheus.Metric) {
		st := cat.Stats()
		gauge(ch, catReady, boolValue(cat.Ready()), replica)
		gauge(ch, catSeq, float64(st.Seq), replica)
		gauge(ch, catStreamSeq, float64(st.StreamLast), replica)
		gauge(ch, catLag, float64(st.Lag), replica)
		counter(ch, catApplied, float64(st.Applied), replica)
		counter(ch, catBadEvents, float64(st.BadEvents), replica)
		counter(ch, catCollisions, float64(st.Collisions), replica)
		counter(ch, catBadItems, float64(st.BadItems), replica)
		gauge(ch, catTools, float64(st.Tools), replica)
		gauge(ch, catServers, float64(st.Servers), replica)
		gauge(ch, catVectors, float64(st.Vectors), replica)
		gauge(ch, catVectorsPending, float64(st.VectorsPending), replica)
		counter(ch, catEmbedErrors, float64(st.EmbedErrors), replica)
		counter(ch, catBadVectors, float64(st.BadVectors), replica)
		gauge(ch, catVlogBytes, float64(st.ValueLogBytes), replica)
		counter(ch, catVlogRewrites, float64(st.ValueLogRewrites), replica)
		for name, ep := range st.Endpoints {
			counter(ch, catRequests, float64(ep.Requests), replica, name)
			counter(ch, catErrors, float64(ep.Errors), replica, name)
			counter(ch, catSeconds, ep.Seconds, replica, name)
		}
	}
}

var (
	policyInfo       = desc("mcpstream_policy_info", "Always 1: the digest of the policy this role enforces (compare across catalog replicas and executors; mcpstream policy check).", "role", "digest")
	policyMismatch   = desc("mcpstream_policy_mismatch", "1 when the last policy check found another catalog replica or executor enforcing another policy than this role (checked at start and every 30 s).", "role")
	policyMismatched = desc("mcpstream_policy_mismatched_instances", "Other catalog replicas and executors whose policy digest differed from this role's at the last check.", "role")
	policyPeers      = desc("mcpstream_policy_peers", "Other catalog replicas and executors that answered the last policy check (0 before the first).", "role")
)

// policyMetrics are a role's policy digest and the outcome of its last policy check.
func policyMetrics(w *policyWatch) collectFunc {
	return func(ch chan<- prometheus.Metric) {
		gauge(ch, policyInfo, 1, w.role, w.digest)
		gauge(ch, policyMismatch, boolValue(w.mismatched.Load() > 0), w.role)
		gauge(ch, policyMismatched, float64(w.mismatched.Load()), w.role)
		gauge(ch, policyPeers, float64(w.peers.Load()), w.role)
	}
}

var (
	enfInfo       = desc("mcpstream_executor_enforcement_info", "Always 1: the enforcement digest of this executor (its limits section, approval patterns and call and approval timeouts; compare across executors; mcpstream policy check).", "digest")
	enfMismatch   = desc("mcpstream_executor_enforcement_mismatch", "1 when the last check found another executor enforcing other limits, approval patterns or timeouts than this one (checked with the policy, at start and every 30 s).")
	enfMismatched = desc("mcpstream_executor_enforcement_mismatched_instances", "Other executors whose enforcement digest differed from this one's at the last check.")
	enfPeers      = desc("mcpstream_executor_enforcement_peers", "Other executors that answered the last check with an enforcement digest (0 before the first).")
	enfUnknown    = desc("mcpstream_executor_enforcement_unknown_instances", "Other executors that answered the last check without a usable enforcement digest (an older mcpstream): not compared.")
)

// enforcementMetrics are an executor's enforcement digest and the outcome of its last check.
func enforcementMetrics(w *policyWatch) collectFunc {
	return func(ch chan<- prometheus.Metric) {
		gauge(ch, enfInfo, 1, w.enforcement)
		gauge(ch, enfMismatch, boolValue(w.enfMismatched.Load() > 0))
		gauge(ch, enfMismatched, float64(w.enfMismatched.Load()))
		gauge(ch, enfPeers, float64(w.enfPeers.Load()))
		gauge(ch, enfUnknown, float64(w.enfUnknown.Load()))
	}
}

var (
	srvStatus  = desc("mcpstream_server_status", "1 for the connector's current status of the server (connecting, ready, unavailable, removed), 0 for the others.", "server", "status")
	srvAttempt = desc("mcpstream_server_connect_attempt", "The connector's current connection attempt (0 once connected).", "server")
)

// serverStatuses are every status a server can be in, for mcpstream_server_status.
var serverStatuses = []string{subjects.StatusConnecting, subjects.StatusReady, subjects.StatusUnavailable, subjects.StatusRemoved}

// registryMetrics are the statuses of a registrysync manager's servers.
func registryMetrics(m *registrysync.Manager) collectFunc {
	return func(ch chan<- prometheus.Metric) {
		for name, st := range m.Statuses() {
			for _, s := range serverStatuses {
				gauge(ch, srvStatus, boolValue(st.Status == s), name, s)
			}
			gauge(ch, srvAttempt, float64(st.Attempt), name)
		}
	}
}
