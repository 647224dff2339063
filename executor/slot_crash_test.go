package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// connectorSide stands for the connectors, which run in another process than the executors:
// it counts the calls running at the server (and the most at once) and runs each on the real
// connector, which times it out on its own clock (the request's timeoutMs), whatever becomes
// of the executor that dispatched it.
type connectorSide struct {
	inner   Dispatcher
	running atomic.Int64
	most    atomic.Int64
}

func (c *connectorSide) begin() {
	n := c.running.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
}

func (c *connectorSide) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	c.begin()
	defer c.running.Add(-1)
	return c.inner.Dispatch(context.WithoutCancel(ctx), server, req)
}

// dyingDispatcher hands a call to the connector, then kills its executor (closes its NATS
// connection: no more heartbeats, no slot renewed or released) while the call runs on.
type dyingDispatcher struct {
	conn    *connectorSide
	nc      *nats.Conn
	ended   chan struct{} // closed when the connector's call ended
	release chan struct{}
}

func (d *dyingDispatcher) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	d.conn.begin()
	rep := make(chan subjects.DispatchReply, 1)
	go func() { // (bounded: the connector ends it at req.TimeoutMs)
		defer close(d.ended)
		defer d.conn.running.Add(-1)
		rep <- d.conn.inner.Dispatch(context.Background(), server, req)
	}()
	d.nc.Close()
	<-d.release
	return <-rep
}

// startCrashRig starts a rig with the fixture server and no executor, then a front end (base,
// workers off) dispatching to the connector side, and executor A (base, no front end) whose
// dispatcher kills it once it has handed its first call to the connector. base gets the rig's
// relister. It returns once fixture__slow is known.
func startCrashRig(t *testing.T, base *Config) (*rig, *connectorSide, *dyingDispatcher) {
	t.Helper()
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	conn := &connectorSide{inner: r.mgr}
	base.Relister = r.mgr
	front := *base
	front.NoWorkers = true
	front.Dispatcher = conn
	r.startExecutor(front, r.env.NC)

	ncA := r.env.Connect(t)
	dying := &dyingDispatcher{conn: conn, nc: ncA, ended: make(chan struct{}), release: make(chan struct{})}
	a := *base
	a.Dispatcher = dying
	a.FrontEnd = new(bool)
	r.startExecutor(a, ncA)
	t.Cleanup(func() { close(dying.release) }) // runs before A's stop
	r.waitTool("fixture__slow")
	return r, conn, dying
}

// probeWhileCrashedCallRuns starts executor B (base's config, dispatching to conn) once
// executor A died with its call running at the connector, and has B take calls of
// fixture__slow with args (the first call redelivered, and more) until A's call ended: none may
// run beside it (conn counts). It returns how many calls it made (bounded: 300).
func probeWhileCrashedCallRuns(t *testing.T, r *rig, base Config, conn *connectorSide, dying *dyingDispatcher, args string) int {
	t.Helper()
	b := base
	b.Dispatcher = conn
	b.FrontEnd = new(bool)
	r.startExecutor(b, r.env.Connect(t))
	probes := 0
	for running := true; running; probes++ {
		select {
		case <-dying.ended:
			running = false
		default:
		}
		r.call("local", "fixture__slow", args)
		if probes > 300 {
			t.Fatal("A's call did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return probes
}

// TestSlotHeldWhileCrashedCallRuns: an executor died right after dispatching a call under a
// concurrency cap of 1. Its slot's lease (1 s here) ran out while the connector still ran the
// call (up to its timeoutMs, 4 s), and another executor admitted the next call beside it: the
// server saw 2 calls at once under a cap of 1. A dispatched call's slot is held until its
// deadline plus the lease, whoever renews it; it is still freed once that has passed.
func TestSlotHeldWhileCrashedCallRuns(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	base := Config{AckWait: time.Second, MaxDeliver: 5, SlotLease: time.Second,
		Limits: Limits{Servers: map[string]Rate{"fixture": {Concurrency: 1}}}}
	r, conn, dying := startCrashRig(t, &base)

	first := make(chan subjects.CallResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, _ := r.client.Call(ctx, "local", subjects.CallRequest{Tool: "fixture__slow", TimeoutMs: 4000,
			Principal: subjects.Principal{User: "local"}, Arguments: json.RawMessage(`{"ms":3000}`)})
		first <- res
	}()
	waitFor(t, "executor A to dispatch and die", func() bool { return conn.most.Load() > 0 })

	probes := probeWhileCrashedCallRuns(t, r, base, conn, dying, `{"ms":300}`)
	if most := conn.most.Load(); most > 1 {
		t.Fatalf("the server ran %d calls at once under a concurrency cap of 1 (%d probes while a crashed executor's call ran)", most, probes)
	}
	<-first

	// The crashed executor's slot is freed without it: past the call's deadline and the lease.
	var last subjects.CallResult
	for i := 0; i < 100; i++ {
		if last = r.call("local", "fixture__slow", `{"ms":1}`); last.Status == subjects.CallOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last.Status != subjects.CallOK {
		t.Fatalf("the crashed executor's slot was never freed: last call %s %+v", last.Status, last.Error)
	}
	if most := conn.most.Load(); most > 1 {
		t.Fatalf("the server ran %d calls at once under a concurrency cap of 1", most)
	}
}

// TestSlotHeldFromItsCreation: a call under a concurrency cap holds its slot for as long as it
// could be dispatched (its timeout plus the lease) from the slot's creation, so that holding it
// through the dispatch costs no write of its own: each call writes its slot twice (taken,
// released: no renewal), whatever its timeout.
func TestSlotHeldFromItsCreation(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{SlotLease: time.Second,
		Limits: Limits{Servers: map[string]Rate{"fixture": {Concurrency: 2}}}}})
	var taken atomic.Int64
	ttls := make(chan string, 64)
	sub, err := r.env.NC.Subscribe("$KV."+subjects.SlotsBucket+".>", func(m *nats.Msg) {
		if m.Header.Get("KV-Operation") != "" {
			return // released
		}
		if taken.Add(1); m.Header.Get("Nats-Expected-Last-Subject-Sequence") == "0" {
			// (nats.go's Create of a key whose last entry is a delete marker tries once
			// with no entry expected, then once after the marker: the same slot taken)
			select {
			case ttls <- m.Header.Get("Nats-TTL"):
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r.env.NC.Flush()
	r.waitTool("fixture__slow")
	stored := func() uint64 { // slot writes JetStream stored (a Create refused stores none)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		s, err := r.env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.LastSeq
	}
	before := stored()
	const calls = 5
	for range calls {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: "fixture__slow", TimeoutMs: 20_000,
			Principal: subjects.Principal{User: "local"}, Arguments: json.RawMessage(`{"ms":1}`)})
		cancel()
		if err != nil || res.Status != subjects.CallOK {
			t.Fatalf("call: %v %s %+v", err, res.Status, res.Error)
		}
	}
	r.env.NC.Flush()
	sub.Unsubscribe()
	if n := stored() - before; n != 2*calls {
		t.Fatalf("%d slot writes for %d quick calls, want 2 each (taken, released), none besides", n, calls)
	}
	if n := taken.Load(); n < calls {
		t.Fatalf("%d slots taken for %d calls", n, calls)
	}
	for range calls {
		ttl, err := time.ParseDuration(<-ttls)
		if err != nil || ttl < 21*time.Second {
			t.Fatalf("a slot taken with TTL %v (%v), want at least the call's timeout (20s) plus the lease (1s)", ttl, err)
		}
	}
}

// TestSlotHeldPastMaxCallTimeout: a request without timeoutMs runs for CallTimeout, which
// MaxCallTimeout does not cap (it caps a request's timeoutMs). The slots bucket's TTL was
// MaxCallTimeout + 2 × SlotLease + 1 s (2.6 s here) and removed a crashed executor's slot then,
// whatever its own TTL (CallTimeout plus the lease and a second, 6 s), while the connector still
// ran its call (3.5 s of its CallTimeout, 4 s): the next call ran beside it under a cap of 1.
func TestSlotHeldPastMaxCallTimeout(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	base := Config{AckWait: time.Second, MaxDeliver: 5, SlotLease: 300 * time.Millisecond,
		CallTimeout: 4 * time.Second, MaxCallTimeout: time.Second,
		Limits: Limits{Servers: map[string]Rate{"fixture": {Concurrency: 1}}}}
	r, conn, dying := startCrashRig(t, &base)

	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		r.client.Call(ctx, "local", subjects.CallRequest{Tool: "fixture__slow", // no timeoutMs: CallTimeout
			Principal: subjects.Principal{User: "local"}, Arguments: json.RawMessage(`{"ms":3500}`)})
	}()
	waitFor(t, "executor A to dispatch and die", func() bool { return conn.most.Load() > 0 })

	probes := probeWhileCrashedCallRuns(t, r, base, conn, dying, `{"ms":200}`)
	if most := conn.most.Load(); most > 1 {
		t.Fatalf("the server ran %d calls at once under a concurrency cap of 1 (%d probes while a crashed executor's call ran for CallTimeout, past MaxCallTimeout)", most, probes)
	}
}
