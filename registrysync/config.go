package registrysync

import (
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// Transports a server may use.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // streamable HTTP
	TransportSSE   = "sse"  // legacy HTTP+SSE
)

// ServerConfig is one MCP server to connect. Secret values (Env, Headers) are already resolved
// from ${ENV_VAR} references by the caller; they are never logged nor published.
type ServerConfig struct {
	Name        string            // unique; the namespace of its tools (server__tool)
	Description string            // what the server offers, indexed for search
	Transport   string            // stdio | http | sse
	Command     string            // stdio
	Args        []string          // stdio
	Env         map[string]string // stdio: extra environment (secrets allowed)
	Dir         string            // stdio: the child's working directory (config cwd), "" = this process's
	URL         string            // http, sse
	Headers     map[string]string // http, sse (secrets allowed)
	// Secrets lists the values (not names) that must be redacted wherever text from this server
	// is logged or published (status reasons, errors, audit).
	Secrets []string
	// AuthContext names whose credentials the server is reached with ("tenant:T", "user:U",
	// "tenant:T/user:U"; "" = the host's own). Lists the server marks cacheScope private are
	// visible only to principals of this context.
	AuthContext string
	// ProtocolVersion pins the MCP protocol ("" = negotiate: 2026-07-28 with fallback). A server
	// that does not speak it fails to connect (no fallback to initialize from 2026-07-28, no
	// other version an initialize answer names: pinnedRefusal, pinMismatch), and is tried again.
	ProtocolVersion string
	// Kinds to list; nil = tools, prompts and resources (each only if the server has it).
	Kinds []string
	// CallTimeout bounds one tools/call: a request's timeoutMs may shorten it, never extend
	// it; 0 → the request's timeoutMs, or 60s when it gives none.
	CallTimeout time.Duration
	// InheritEnv passes this process's whole environment to a stdio child. By default the
	// child gets only PATH, HOME, USER, LANG, TMPDIR and the like (as the MCP SDKs do) plus
	// Env, so that no other server's credentials reach it.
	InheritEnv bool
}

// Config configures a Manager; the zero value means defaults.
type Config struct {
	Servers []ServerConfig
	// Debounce groups a burst of list_changed notifications into one re-list; 0 → 250ms. A
	// kind whose notifications keep finding the list unchanged waits longer (up to 10
	// debounces, and never more than BackoffMax).
	Debounce time.Duration
	// MaxPages caps pagination of one list (a server handing out endless cursors); 0 → 1000.
	MaxPages int
	// MaxDefinitionBytes rejects one definition larger than this; 0 → 256 KiB.
	MaxDefinitionBytes int
	// ListTimeout bounds one full list of one kind; 0 → 30s.
	ListTimeout time.Duration
	// ConnectTimeout bounds connecting and the handshake; 0 → 20s. Half of it (at least 5 s)
	// bounds server/discover before initialize is tried (discoverTimeout); all of it when
	// ProtocolVersion pins 2026-07-28 (initialize is not tried).
	ConnectTimeout time.Duration
	// BackoffInitial and BackoffMax shape reconnects (exponential with jitter); 0 → 250ms, 30s.
	// The backoff starts over once a session has lasted BackoffMax.
	BackoffInitial, BackoffMax time.Duration
	// ResyncEvery re-lists every server periodically even without list_changed (for TTLs and
	// servers that never notify); 0 → 5 minutes; negative → never.
	ResyncEvery time.Duration

	// Additions beyond the first contract (zero values mean defaults too).

	// PingEvery is how often a session is probed (ping on legacy connections, server/discover
	// on 2026-07-28, where ping was removed); 0 → 30s; negative → never. A stdio child that
	// exits is noticed at once regardless.
	PingEvery time.Duration
	// PingTimeout bounds one probe. A probe that fails at the transport level or times out
	// closes the session and reconnects; a JSON-RPC error answer counts as alive; 0 → 10s.
	PingTimeout time.Duration
	// DrainTimeout bounds how long Remove and shutdown wait for tools/call requests in flight
	// before closing a session (those callers then get outcome_unknown); 0 → 10s.
	DrainTimeout time.Duration
	// MaxConcurrentCalls caps tools/call requests in flight through the NATS dispatch endpoint;
	// beyond it a request is answered unavailable without being sent; 0 → 256.
	MaxConcurrentCalls int
	// HeartbeatEvery is how often the process sends a heartbeat while it runs (see
	// package liveness: a watchdog declares the servers of a silent process unavailable,
	// connector_lost); 0 → 5s; negative → none (its statuses then carry no heartbeatMs and
	// nobody watches it); a positive period is kept within subjects.MinHeartbeat (50 ms) and
	// subjects.MaxHeartbeat (1 h), the bounds a watchdog honours.
	HeartbeatEvery time.Duration
}

// Defaults applied to zero Config and ServerConfig values.
const (
	DefaultDebounce           = 250 * time.Millisecond
	DefaultHeartbeatEvery     = 5 * time.Second
	DefaultMaxPages           = 1000
	DefaultMaxDefinitionBytes = 256 << 10
	DefaultListTimeout        = 30 * time.Second
	DefaultConnectTimeout     = 20 * time.Second
	DefaultBackoffInitial     = 250 * time.Millisecond
	DefaultBackoffMax         = 30 * time.Second
	DefaultResyncEvery        = 5 * time.Minute
	DefaultPingEvery          = 30 * time.Second
	DefaultPingTimeout        = 10 * time.Second
	DefaultDrainTimeout       = 10 * time.Second
	DefaultMaxConcurrentCalls = 256
	DefaultCallTimeout        = 60 * time.Second
)

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Debounce, DefaultDebounce)
	def(&c.ListTimeout, DefaultListTimeout)
	def(&c.ConnectTimeout, DefaultConnectTimeout)
	def(&c.BackoffInitial, DefaultBackoffInitial)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.ResyncEvery, DefaultResyncEvery)
	def(&c.PingEvery, DefaultPingEvery)
	def(&c.PingTimeout, DefaultPingTimeout)
	def(&c.DrainTimeout, DefaultDrainTimeout)
	def(&c.HeartbeatEvery, DefaultHeartbeatEvery)
	if c.HeartbeatEvery > 0 {
		// A watchdog takes a period past the bounds for the bound: one beating less often than
		// once an hour would be declared lost while it runs, and one under a millisecond
		// announced no period at all (heartbeatMs 0: nobody watched it) while it beat.
		c.HeartbeatEvery = min(max(c.HeartbeatEvery, subjects.MinHeartbeat), subjects.MaxHeartbeat)
	}
	if c.MaxPages <= 0 {
		c.MaxPages = DefaultMaxPages
	}
	if c.MaxDefinitionBytes <= 0 {
		c.MaxDefinitionBytes = DefaultMaxDefinitionBytes
	}
	if c.MaxConcurrentCalls <= 0 {
		c.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if c.BackoffMax < c.BackoffInitial {
		c.BackoffMax = c.BackoffInitial
	}
	return c
}
