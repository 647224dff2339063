package indexer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// t0 is the fixed listing time of test snapshots: stored content must not depend on the clock.
var t0 = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

// tool is a raw tool definition for tests.
func tool(name, desc string, extra ...string) json.RawMessage {
	m := map[string]any{"name": name, "description": desc,
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}}
	for i := 0; i+1 < len(extra); i += 2 {
		var v any
		if err := json.Unmarshal([]byte(extra[i+1]), &v); err != nil {
			panic(fmt.Sprintf("tool %s: field %s: %v", name, extra[i], err))
		}
		m[extra[i]] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func snapshot(server, desc string, items ...json.RawMessage) *subjects.Snapshot {
	h := sha256.New()
	for _, it := range items {
		h.Write(it)
		h.Write([]byte{0})
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	return &subjects.Snapshot{
		V: subjects.Version, Type: subjects.EventSnapshot, Server: server, Kind: subjects.KindTools,
		Fingerprint: hex.EncodeToString(h.Sum(nil)), ListedAt: t0, Pages: 1, Items: items,
		Info: &subjects.ServerInfo{Description: desc, Transport: "stdio", Protocol: "2026-07-28"},
	}
}

func status(server, st string) *subjects.Status {
	return &subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: server, Status: st, At: t0}
}

func changed(server string) *subjects.ListChanged {
	return &subjects.ListChanged{V: subjects.Version, Type: subjects.EventChanged, Server: server, Kind: subjects.KindTools, At: t0}
}

func revoke(server string, tools, restore []string) *subjects.Revocation {
	return &subjects.Revocation{V: subjects.Version, Type: subjects.EventRevoked, Server: server, Tools: tools, Restore: restore, At: t0}
}

// publish publishes registry events in order and returns the last stream sequence.
func publish(t testing.TB, js jetstream.JetStream, evs ...any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seq uint64
	for _, ev := range evs {
		var subject string
		var data []byte
		if e, ok := ev.(rawEvent); ok {
			subject, data = e.subject, e.data
		} else {
			subject, data = eventMsg(t, ev)
		}
		ack, err := js.Publish(ctx, subject, data)
		if err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
		seq = ack.Sequence
	}
	return seq
}

// eventMsg returns the subject and payload of a registry event.
func eventMsg(t testing.TB, ev any) (string, []byte) {
	t.Helper()
	var subject string
	switch e := ev.(type) {
	case *subjects.Snapshot:
		subject = subjects.RegistrySnapshot(e.Server, e.Kind)
	case *subjects.ListChanged:
		subject = subjects.RegistryChanged(e.Server, e.Kind)
	case *subjects.Status:
		subject = subjects.RegistryStatus(e.Server)
	case *subjects.Revocation:
		subject = subjects.RegistryRevoked(e.Server)
	case *subjects.Confirmed:
		subject = subjects.RegistryConfirmed(e.Server, e.Kind)
	default:
		t.Fatalf("unknown event %T", ev)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return subject, data
}

// rawEvent is a message published as is (malformed input).
type rawEvent struct {
	subject string
	data    []byte
}

// replica is a running catalog replica of a test.
type replica struct {
	*Catalog
	stopOnce sync.Once
	stopFn   func() error
}

// stop stops following and serving, and closes the store (also done at cleanup).
func (r *replica) stop(t testing.TB) {
	t.Helper()
	r.stopOnce.Do(func() {
		if err := r.stopFn(); err != nil {
			t.Errorf("stop replica: %v", err)
		}
	})
}

// startReplica opens a catalog on dir ("" = in memory), follows env's stream and, when nc is not
// nil, serves the catalog service on it.
func startReplica(t testing.TB, env *natstest.Env, dir string, pol *policy.Policy, nc *nats.Conn) *replica {
	t.Helper()
	return startReplicaConfig(t, env, Config{Dir: dir, Policy: pol}, nc)
}

// startReplicaConfig is startReplica with more of the configuration (InMemory when Dir is "";
// the test clock, t0 + 1 min, unless cfg.Now is set).
func startReplicaConfig(t testing.TB, env *natstest.Env, cfg Config, nc *nats.Conn) *replica {
	t.Helper()
	return startReplicaJS(t, env.JS, cfg, nc)
}

// startReplicaOn is startReplica in memory, following the stream through js (another
// connection than env's).
func startReplicaOn(t testing.TB, env *natstest.Env, js jetstream.JetStream) *replica {
	t.Helper()
	return startReplicaJS(t, js, Config{}, nil)
}

// startReplicaJS is startReplicaConfig following the stream through js.
func startReplicaJS(t testing.TB, js jetstream.JetStream, cfg Config, nc *nats.Conn) *replica {
	t.Helper()
	cfg.InMemory = cfg.Dir == ""
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return t0.Add(time.Minute) }
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	followErr := make(chan error, 1)
	serveErr := make(chan error, 1)
	go func() { followErr <- c.Follow(ctx, js) }()
	if nc != nil {
		go func() { serveErr <- c.Serve(ctx, nc) }()
	} else {
		serveErr <- nil
	}
	r := &replica{Catalog: c}
	r.stopFn = func() error {
		cancel()
		return errors.Join(<-followErr, <-serveErr, c.Close())
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// waitFor polls cond every 5 ms, up to 2000 times (10 s), and fails the test if it never holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func waitSeq(t testing.TB, c *Catalog, seq uint64) {
	t.Helper()
	for range 2000 {
		if c.Seq() >= seq && c.Ready() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for seq %d (at %d, ready %v)", seq, c.Seq(), c.Ready())
}

func names(tools []subjects.ToolInfo) []string {
	out := []string{}
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func find(t testing.TB, c *Catalog, q string, mods ...func(*subjects.SearchRequest)) subjects.SearchReply {
	t.Helper()
	req := subjects.SearchRequest{V: 1, Query: q}
	for _, m := range mods {
		m(&req)
	}
	return c.Search(context.Background(), req)
}

func as(pr subjects.Principal) func(*subjects.SearchRequest) {
	return func(r *subjects.SearchRequest) { r.Principal = pr }
}

func mustNoErr(t testing.TB, e *subjects.Error) {
	t.Helper()
	if e != nil {
		t.Fatalf("unexpected error %s: %s", e.Code, e.Message)
	}
}
