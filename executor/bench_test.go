package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/subjects"
)

// benchProtocol is MCPSTREAM_BENCH_PROTOCOL: a protocol version both sides of BenchmarkCall are
// pinned to ("" negotiates the newest).
var benchProtocol = os.Getenv("MCPSTREAM_BENCH_PROTOCOL")

// benchTool is the call measured: a cheap read-only demo tool, so the numbers show the path, not
// the tool.
const (
	benchServer = "kb"
	benchTool   = "get_document"
	benchArgs   = `{"id":"POL-TRAVEL"}`
)

// latencies collects call durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// drive runs n calls over c goroutines and returns the latencies and calls per second.
func drive(b *testing.B, n, c int, call func() error) (*latencies, float64) {
	b.Helper()
	lat := &latencies{}
	d := driveInto(b, lat, n, c, call)
	return lat, float64(n) / d.Seconds()
}

// driveInto runs n calls over c goroutines, adds their latencies to lat and returns the time
// taken.
func driveInto(b *testing.B, lat *latencies, n, c int, call func() error) time.Duration {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := call(); err != nil {
					failed.Store(err)
					return
				}
				lat.add(time.Since(t0))
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchRounds is how many rounds driveRounds splits each path's calls into.
const benchRounds = 5

// driveRounds runs n calls of every path over c goroutines in benchRounds rounds, the paths in a
// rotating order within each round, so that a change in the machine's load during the run
// weighs on every path alike. It returns each path's latencies, calls per second and CPU time
// per call of this process and its children (0 where that cannot be read; see processTreeCPU).
func driveRounds(b *testing.B, n, c int, paths ...func() error) ([]*latencies, []float64, []time.Duration) {
	b.Helper()
	lats := make([]*latencies, len(paths))
	took := make([]time.Duration, len(paths))
	cpu := make([]time.Duration, len(paths))
	for i := range lats {
		lats[i] = &latencies{}
	}
	per := max(n/benchRounds, c)
	cpuOK := true
	for r := range benchRounds {
		for k := range paths {
			i := (r + k) % len(paths)
			c0, ok0 := processTreeCPU()
			took[i] += driveInto(b, lats[i], per, c, paths[i])
			c1, ok1 := processTreeCPU()
			cpu[i] += c1 - c0
			cpuOK = cpuOK && ok0 && ok1
		}
	}
	rates := make([]float64, len(paths))
	perCall := make([]time.Duration, len(paths))
	for i := range rates {
		rates[i] = float64(per*benchRounds) / took[i].Seconds()
		if cpuOK {
			perCall[i] = cpu[i] / time.Duration(per*benchRounds)
		}
	}
	return lats, rates, perCall
}

// BenchmarkCall compares, in one run, a direct mcp-go client call to a demo server (stdio child,
// one shared session) with the same call through NATS and the executor (exec request/reply,
// durable calls stream, policy, schema, audit, result stream; the connector is a real
// registrysync manager with the same kind of stdio child). Ratios are executor / direct; "conn"
// is the connector alone (registrysync's Dispatch in-process), the part of the path that is not
// the executor's; "calls" is the executor path without the front end (Client.CallDirect: the
// request persisted straight on the calls stream); "bare" is the floor of any durable broker here:
// the same NATS work around the same connector call and nothing else (bareDurableBroker). MCPSTREAM_BENCH_EXEC_ONLY=1 runs only the
// executor path at 64 callers (=calls: the CallDirect one, =bare: the bare broker), for profiles
// (-cpuprofile).
// MCPSTREAM_TEST_NATS=inprocess connects everything to the embedded server in-process, as the
// roles of mcpstream up are (default: loopback TCP, as separate role processes are).
// MCPSTREAM_BENCH_PROTOCOL=2025-11-25 pins the direct client and the connector to that protocol
// version (mcp-go's per-request work on 2026-07-28 halves the direct baseline's calls/s here).
// The paths run interleaved, in rounds with a rotating order (driveRounds), so that the
// machine's load changing during the run weighs on each of them alike; on Linux each path also
// reports the CPU time per call of this process and its MCP server children (*-cpu-µs/call), a
// figure other processes on the machine do not inflate.
func BenchmarkCall(b *testing.B) {
	r := startRig(b, rigOptions{servers: []string{benchServer}, protocol: benchProtocol})
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	tr := transport.NewStdio(exe, []string{childEnv + "=demo:" + benchServer})
	if err := tr.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var copts []client.ClientOption
	if benchProtocol != "" {
		copts = append(copts, client.WithProtocolVersion(benchProtocol))
	}
	direct := client.NewClient(tr, copts...)
	b.Cleanup(func() { direct.Close() })
	ctx := context.Background()
	if _, err := direct.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "bench", Version: "1"}}}); err != nil {
		b.Fatal(err)
	}
	b.Logf("protocols: direct %s, connector %s", direct.ProtocolVersion(), r.mgr.Statuses()[benchServer].Protocol)
	directCall := func() error {
		req := mcp.CallToolRequest{}
		req.Params.Name = benchTool
		req.Params.Arguments = json.RawMessage(benchArgs)
		res, err := direct.CallTool(ctx, req)
		if err == nil && res.IsError {
			err = fmt.Errorf("direct call: isError")
		}
		return err
	}
	// The connector alone (registrysync's Dispatch in-process, no NATS): the part of the
	// overhead that is not the executor's.
	viaConnector := func() error {
		rep := r.mgr.Dispatch(ctx, benchServer, subjects.DispatchRequest{V: 1, CallID: "bench", Tool: benchTool, Arguments: json.RawMessage(benchArgs)})
		if rep.Error != nil {
			return rep.Error
		}
		return nil
	}
	public := subjects.PublicName(benchServer, benchTool)
	viaExecutor := func() error {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: public, Arguments: json.RawMessage(benchArgs)})
		if err == nil && res.Status != subjects.CallOK {
			err = fmt.Errorf("executor call: %s %+v", res.Status, res.Error)
		}
		return err
	}
	// The same call persisted straight on the calls stream (Client.CallDirect: no front end).
	viaCalls := func() error {
		res, err := r.client.CallDirect(ctx, "local", subjects.CallRequest{Tool: public, Arguments: json.RawMessage(benchArgs)})
		if err == nil && res.Status != subjects.CallOK {
			err = fmt.Errorf("direct executor call: %s %+v", res.Status, res.Error)
		}
		return err
	}
	viaBare := bareDurableBroker(b, r, func() ([]byte, error) {
		rep := r.mgr.Dispatch(ctx, benchServer, subjects.DispatchRequest{V: 1, CallID: "bench", Tool: benchTool, Arguments: json.RawMessage(benchArgs)})
		if rep.Error != nil {
			return nil, rep.Error
		}
		return rep.Result, nil
	})
	// Warm both paths (sessions, schema compilation, consumers).
	for range 50 {
		if err := viaCalls(); err != nil {
			b.Fatal(err)
		}
		if err := viaBare(); err != nil {
			b.Fatal(err)
		}
		if err := directCall(); err != nil {
			b.Fatal(err)
		}
		if err := viaExecutor(); err != nil {
			b.Fatal(err)
		}
		if err := viaConnector(); err != nil {
			b.Fatal(err)
		}
	}
	if only := os.Getenv("MCPSTREAM_BENCH_EXEC_ONLY"); only != "" {
		path := viaExecutor
		switch only {
		case "calls":
			path = viaCalls
		case "bare":
			path = viaBare
		}
		b.Run("exec-only", func(b *testing.B) {
			n := max(b.N, 64)
			c0, ok0 := processTreeCPU()
			lat, rate := drive(b, n, 64, path)
			c1, ok1 := processTreeCPU()
			b.ReportMetric(float64(lat.quantile(0.5).Microseconds())/1000, "exec-p50-ms")
			b.ReportMetric(rate, "exec-calls/s")
			if ok0 && ok1 {
				b.ReportMetric(float64((c1-c0).Microseconds())/float64(n), "exec-cpu-µs/call")
			}
		})
		return
	}
	for _, c := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", c), func(b *testing.B) {
			lats, rates, cpu := driveRounds(b, max(b.N, c), c, directCall, viaConnector, viaExecutor, viaCalls, viaBare)
			dLat, cLat, eLat, sLat, bLat := lats[0], lats[1], lats[2], lats[3], lats[4]
			dRate, cRate, eRate, sRate, bRate := rates[0], rates[1], rates[2], rates[3], rates[4]
			if cpu[0] > 0 {
				// CPU per call of the whole machine's share of each path (this process, which runs
				// NATS, the executor and the connector, plus the MCP server children).
				b.ReportMetric(float64(cpu[0].Microseconds()), "direct-cpu-µs/call")
				b.ReportMetric(float64(cpu[2].Microseconds()), "exec-cpu-µs/call")
				b.ReportMetric(float64(cpu[3].Microseconds()), "calls-cpu-µs/call")
				b.ReportMetric(float64(cpu[3])/float64(cpu[0]), "calls-cpu-ratio")
				b.ReportMetric(float64(cpu[4].Microseconds()), "bare-cpu-µs/call")
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(dLat.quantile(0.5)), "direct-p50-ms")
			b.ReportMetric(ms(dLat.quantile(0.99)), "direct-p99-ms")
			b.ReportMetric(dRate, "direct-calls/s")
			b.ReportMetric(ms(cLat.quantile(0.5)), "conn-p50-ms")
			b.ReportMetric(cRate, "conn-calls/s")
			b.ReportMetric(ms(eLat.quantile(0.5)), "exec-p50-ms")
			b.ReportMetric(ms(eLat.quantile(0.99)), "exec-p99-ms")
			b.ReportMetric(eRate, "exec-calls/s")
			b.ReportMetric(float64(eLat.quantile(0.5))/float64(dLat.quantile(0.5)), "p50-ratio")
			b.ReportMetric(float64(eLat.quantile(0.99))/float64(dLat.quantile(0.99)), "p99-ratio")
			b.ReportMetric(eRate/dRate, "rate-ratio")
			b.ReportMetric(float64(eLat.quantile(0.5))/float64(cLat.quantile(0.5)), "p50-ratio-vs-conn")
			b.ReportMetric(ms(sLat.quantile(0.5)), "calls-p50-ms")
			b.ReportMetric(ms(sLat.quantile(0.99)), "calls-p99-ms")
			b.ReportMetric(sRate, "calls-calls/s")
			b.ReportMetric(float64(sLat.quantile(0.5))/float64(dLat.quantile(0.5)), "calls-p50-ratio")
			b.ReportMetric(sRate/dRate, "calls-rate-ratio")
			b.ReportMetric(ms(bLat.quantile(0.5)), "bare-p50-ms")
			b.ReportMetric(bRate, "bare-calls/s")
			b.ReportMetric(float64(bLat.quantile(0.5))/float64(dLat.quantile(0.5)), "bare-p50-ratio")
			b.ReportMetric(float64(sLat.quantile(0.5))/float64(bLat.quantile(0.5)), "calls-p50-vs-bare")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// bareDurableBroker is the floor of a durable broker on this machine, for BenchmarkCall: the
// same request and answer shapes and the same NATS work as the CallDirect path — the request
// persisted on a work-queue stream (file storage, de-duplicated by id), taken by one of 64
// workers, the answer stored on a results stream (waiting for its PubAck) and sent to the
// caller's inbox (then yieldToReply), the request acked — around the same connector call, with none of the
// executor's own work (registry, freshness, policy, schema, limits, claims, audit). It returns
// the caller's side of one call.
func bareDurableBroker(b *testing.B, r *rig, tool func() ([]byte, error)) func() error {
	ctx := context.Background()
	js := r.env.JS
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "BENCH_REQ", Subjects: []string{"bench.req"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute},
		{Name: "BENCH_RES", Subjects: []string{"bench.res.>"}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute, MaxAge: time.Hour},
	} {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "BENCH_REQ", jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	const workers = 64
	iter, err := cons.Messages(jetstream.PullMaxMessages(workers))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() { iter.Stop(); wg.Wait() })
	for range workers {
		wg.Go(func() {
			for {
				m, err := iter.Next()
				if err != nil {
					return
				}
				var req struct {
					ID string `json:"id"`
				}
				result, terr := tool()
				if json.Unmarshal(m.Data(), &req) != nil || terr != nil {
					m.Term()
					continue
				}
				res, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: req.ID, Tenant: "local", Status: subjects.CallOK, Result: result})
				out := &nats.Msg{Subject: "bench.res." + req.ID, Data: res, Header: nats.Header{}}
				out.Header.Set(subjects.HeaderMsgID, "result:"+req.ID)
				if _, err := js.PublishMsg(ctx, out); err != nil {
					m.Nak()
					continue
				}
				r.env.NC.Publish(m.Headers().Get(subjects.HeaderReplyTo), res)
				yieldToReply() // as the executor's workers do (see yieldToReply)
				m.Ack()
			}
		})
	}
	nc := r.env.NC
	return func() error {
		req, data, _ := prepare("local", subjects.CallRequest{Tool: subjects.PublicName(benchServer, benchTool), Arguments: json.RawMessage(benchArgs)})
		inbox, answers, done, err := answerMuxFor(nc).wait()
		if err != nil {
			return err
		}
		defer done()
		m := &nats.Msg{Subject: "bench.req", Data: data, Header: nats.Header{}}
		m.Header.Set(subjects.HeaderMsgID, req.ID)
		m.Header.Set(subjects.HeaderReplyTo, inbox)
		if _, err := js.PublishMsgAsync(m); err != nil {
			return err
		}
		select {
		case a := <-answers:
			var res subjects.CallResult
			if err := json.Unmarshal(a.Data, &res); err != nil || res.ID != req.ID {
				return fmt.Errorf("bare broker: bad answer %s", a.Data)
			}
			return nil
		case <-time.After(30 * time.Second):
			return fmt.Errorf("bare broker: no answer for %s", req.ID)
		}
	}
}

// BenchmarkStalenessWindow measures the time from a server's tools/list_changed that removes a
// tool (the connector's ListChanged event) to the first call of it refused stale, while callers
// stream calls of it. Each round hides the tool through the demo server's control file, waits
// for the first refusal, then restores it.
func BenchmarkStalenessWindow(b *testing.B) {
	r := startRig(b, rigOptions{servers: []string{benchServer}})
	public := subjects.PublicName(benchServer, benchTool)
	ctx := context.Background()
	var win latencies
	for i := 0; i < b.N; i++ {
		var firstRefusal atomic.Pointer[time.Time]
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: public, Arguments: json.RawMessage(benchArgs)})
					if err == nil && res.Error != nil && res.Error.Code == subjects.CodeStale {
						at := res.FinishedAt
						firstRefusal.CompareAndSwap(nil, &at)
					}
				}
			})
		}
		changedAt := r.watchChanged(benchServer)
		r.setControl(benchServer, demoservers.Control{Hide: []string{benchTool}})
		waitFor(b, "first refusal", func() bool { return firstRefusal.Load() != nil })
		close(stop)
		wg.Wait()
		changed := <-changedAt
		win.add(firstRefusal.Load().Sub(changed))
		r.setControl(benchServer, demoservers.Control{})
		waitFor(b, "tool fresh again", func() bool { return r.ex.reg.view.Tool(benchServer, benchTool).State == "fresh" })
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(win.quantile(0.5)), "window-p50-ms")
	b.ReportMetric(ms(win.quantile(0.99)), "window-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// watchChanged returns the At of the next ListChanged event of server's tools.
func (r *rig) watchChanged(server string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	var sub *nats.Subscription
	sub, err := r.env.NC.Subscribe(subjects.RegistryChanged(server, subjects.KindTools), func(m *nats.Msg) {
		var ev subjects.ListChanged
		if json.Unmarshal(m.Data, &ev) == nil {
			select {
			case ch <- ev.At:
				sub.Unsubscribe()
			default:
			}
		}
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return ch
}
