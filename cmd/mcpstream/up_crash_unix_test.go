//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/subjects"
)

// crashUp is `mcpstream up` run as a child process of the test (so that it can be killed
// outright), on free loopback ports.
type crashUp struct {
	cmd          *exec.Cmd
	out, errOut  *lockedBuffer
	done         chan error
	nats, health string
}

func startCrashUp(t *testing.T, args ...string) *crashUp {
	t.Helper()
	p := &crashUp{out: &lockedBuffer{}, errOut: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], append([]string{"up", "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = append(os.Environ(), envTestMain+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errOut
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	p.nats, p.health = waitStartLine(t, "up", 1200, p.out, p.errOut, p.done)
	c := http.Client{Timeout: 5 * time.Second}
	waitFor(t, "/healthz 200", 1200, func() bool {
		resp, err := c.Get(p.health + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// children returns the pids of the processes whose parent is up.
func (p *crashUp) children() []int {
	var out []int
	for _, pr := range processes() {
		if pr.ppid == p.cmd.Process.Pid {
			out = append(out, pr.pid)
		}
	}
	return out
}

// ticketCalls counts the createIssue calls the ticketing server was sent, by title, from its
// logged stdin, and the number of server starts before each title's first call.
func ticketCalls(t *testing.T, path string) (calls map[string]int, start map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls, start = map[string]int{}, map[string]int{}
	starts := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if line == "START" {
			starts++
			continue
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					Title string `json:"title"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &msg) != nil || msg.Method != "tools/call" || msg.Params.Name != "createIssue" {
			continue
		}
		title := msg.Params.Arguments.Title
		calls[title]++
		if _, ok := start[title]; !ok {
			start[title] = starts
		}
	}
	return calls, start
}

// TestUpKilledUnderLoad kills `mcpstream up` with SIGKILL while calls run and wait, and starts
// it again on the same data directory: it starts (no stale lock), the killed process's stdio
// servers exit, every call accepted gets exactly one answer (those not yet taken run after the
// restart), no createIssue (neither read-only nor idempotent) reaches the server twice, a call
// waiting for approval can still be approved, and the catalog matches the registry. It found
// calls accepted before the kill refused "server ticketing is not connected (connecting)" after
// the restart, now and then: the registry's last status of the server was the killed process's
// ready, and the executor gave up on the new connector within a second (the executor's
// TestCrashRestartWaitsForConnector shows it every time).
func TestUpKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts up with three stdio servers (run without -short)")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ticketLog := filepath.Join(dir, "ticketing.stdin")
	kbControl := filepath.Join(dir, "kb.control.json")
	// The ticketing demo server behind a shell that logs what it is sent (START at each start),
	// which outlives the server process: its tickets are in memory. (The configuration reads
	// "$$" as "$".)
	ticketing := `echo START >> "$1"; tee -a "$1" | "$2" demo-server ticketing`
	cfg, err := json.Marshal(map[string]any{"servers": []map[string]any{
		{"name": "ticketing", "command": "/bin/sh", "args": []string{"-c", strings.ReplaceAll(ticketing, "$", "$$"), "sh", ticketLog, os.Args[0]}},
		{"name": "kb", "command": os.Args[0], "args": []string{"demo-server", "kb", "--control", kbControl}},
		{"name": "logging", "command": os.Args[0], "args": []string{"demo-server", "logging"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "mcpstream.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfgPath, "--data", data}

	up := startCrashUp(t, args...)
	connect := func(url string) (*nats.Conn, executor.Client) {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return nc, executor.Client{NC: nc, JS: js}
	}
	nc1, cl := connect(up.nats)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	create := func(id string) subjects.CallRequest {
		return subjects.CallRequest{ID: id, Tool: "ticketing__createIssue",
			Arguments: json.RawMessage(`{"title":"` + id + `","body":"","priority":"low"}`)}
	}
	// Calls waiting for approval at the kill.
	var approvals []string
	for i := range 3 {
		id := fmt.Sprintf("close-%d", i)
		req := subjects.CallRequest{ID: id, Tool: "ticketing__closeIssue", Arguments: json.RawMessage(`{"id":"TCK-1"}`), ApprovalTimeoutMs: 600_000}
		if _, _, err := cl.Submit(ctx, "local", req); err != nil {
			t.Fatal(err)
		}
		approvals = append(approvals, id)
	}

	var (
		mu        sync.Mutex
		submitted = map[string]bool{} // id → its storing was acknowledged
		answered  = map[string]subjects.CallResult{}
		n, subs   atomic.Int64
		wg        sync.WaitGroup
	)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	// Callers that wait: createIssue straight on the calls stream, and read-only tools through
	// the front end.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				id := fmt.Sprintf("direct-%d-%d", w, i)
				mu.Lock()
				submitted[id] = false
				mu.Unlock()
				res, err := cl.CallDirect(loadCtx, "local", create(id))
				if err == nil {
					mu.Lock()
					submitted[id] = true
					answered[id] = res
					mu.Unlock()
					n.Add(1)
				}
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				req := subjects.CallRequest{ID: fmt.Sprintf("read-%d-%d", w, i), Tool: "ticketing__listIssues", Arguments: json.RawMessage(`{"limit":1}`)}
				if w == 1 {
					req.Tool, req.Arguments = "kb__search_knowledge_base", json.RawMessage(`{"query":"refund"}`)
				}
				cl.Call(loadCtx, "local", req)
			}
		}()
	}
	// Callers that do not wait: a stream of createIssue requests.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100 && loadCtx.Err() == nil; i++ {
				id := fmt.Sprintf("submit-%d-%d", w, i)
				mu.Lock()
				submitted[id] = false
				mu.Unlock()
				if _, _, err := cl.Submit(loadCtx, "local", create(id)); err == nil {
					mu.Lock()
					submitted[id] = true
					mu.Unlock()
					subs.Add(1)
				}
			}
		}()
	}
	// A list change under load.
	if err := os.WriteFile(kbControl, []byte(`{"add":["summarize_document"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "300 calls submitted under load", 1200, func() bool { return subs.Load() >= 300 })
	children := up.children()
	if len(children) != 3 {
		t.Errorf("up runs %d children, want 3: %v", len(children), children)
	}
	if err := up.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-up.done
	up.done <- nil
	// The connection to the killed process's NATS is gone: the callers stop.
	stopLoad()
	wg.Wait()
	nc1.Close()

	// Its stdio servers see their stdin close and exit.
	for i := 0; ; i++ {
		var left []int
		for _, pid := range children {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if i == 400 {
			t.Fatalf("20s after up was killed its stdio servers still run: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}

	up2 := startCrashUp(t, args...)
	_, cl2 := connect(up2.nats)

	// The calls whose storing was not acknowledged may or may not be stored: submitted again
	// under their ids (as Submit's contract says), they are stored once.
	mu.Lock()
	var ids []string
	acked := 0
	for id, ok := range submitted {
		ids = append(ids, id)
		if ok {
			acked++
		}
	}
	mu.Unlock()
	for id, ok := range submitted {
		if !ok {
			if _, _, err := cl2.Submit(ctx, "local", create(id)); err != nil {
				t.Fatalf("submit %s again: %v", id, err)
			}
		}
	}
	// The calls waiting for approval at the kill wait again and can be approved.
	for _, id := range approvals {
		var rep subjects.ApprovalReply
		waitFor(t, "call "+id+" waiting for approval again", 1200, func() bool {
			rep, err = cl2.Decide(ctx, subjects.Approval{ID: id, Approve: true, By: "test"})
			return err == nil
		})
		if !rep.OK {
			t.Errorf("approve %s: %+v", id, rep)
		}
		res, err := cl2.Await(ctx, "local", id)
		if err != nil || res.Status != subjects.CallOK {
			t.Errorf("approved %s: %+v %v", id, res, err)
		}
	}

	// Every call gets its one answer.
	results := map[string]subjects.CallResult{}
	for _, id := range ids {
		res, err := cl2.Await(ctx, "local", id)
		if err != nil {
			t.Fatalf("await %s: %v", id, err)
		}
		results[id] = res
		if prev, ok := answered[id]; ok && (prev.Status != res.Status || string(prev.Result) != string(res.Result)) {
			t.Errorf("call %s answered %s %s before the kill, %s %s after", id, prev.Status, prev.Result, res.Status, res.Result)
		}
	}
	// The results stream holds one answer per call.
	js2 := cl2.JS
	cons, err := js2.OrderedConsumer(ctx, "MCPSTREAM_RESULTS", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string][]string{}
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var res subjects.CallResult
			if err := json.Unmarshal(m.Data(), &res); err != nil {
				t.Fatalf("result %s: %v", m.Subject(), err)
			}
			stored[res.ID] = append(stored[res.ID], string(m.Data()))
		}
		if got == 0 {
			break
		}
	}
	for _, id := range ids {
		if len(stored[id]) == 0 {
			t.Errorf("call %s answered %s but no answer is stored", id, results[id].Status)
		}
	}
	for id, all := range stored {
		for _, s := range all[1:] {
			if s != all[0] {
				t.Errorf("call %s has %d different answers stored: %s", id, len(all), all)
				break
			}
		}
	}

	// No createIssue reached the server twice, those answered ok reached it once, and none was
	// refused.
	calls, start := ticketCalls(t, ticketLog)
	after, unknown := 0, 0
	statuses := map[string]int{}
	for _, id := range ids {
		res := results[id]
		key := res.Status
		if res.Error != nil {
			key += "/" + res.Error.Code
		}
		statuses[key]++
		switch {
		case calls[id] > 1:
			t.Errorf("call %s sent to the server %d times (answer %s)", id, calls[id], key)
		case res.Status == subjects.CallOK && calls[id] != 1:
			t.Errorf("call %s answered ok but sent to the server %d times", id, calls[id])
		case res.Status == subjects.CallRefused:
			// Nothing refuses these calls: not a server still connecting after the restart
			// (the killed process's connector said nothing, its last status is ready).
			t.Errorf("call %s refused: %s (sent to the server %d times)", id, res.Error.Message, calls[id])
		}
		if res.Error != nil && res.Error.Code == subjects.CodeOutcomeUnknown {
			unknown++
		}
		if calls[id] == 1 && start[id] == 2 {
			after++
		}
	}
	t.Logf("%d createIssue calls (%d acknowledged before the kill), %d run after the restart, %d outcome_unknown; answers %v",
		len(ids), acked, after, unknown, statuses)

	// The catalog matches the registry.
	rowsOf := func(extra ...string) map[string]string {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		out, errOut, err := runCmd(t, cctx, append([]string{"servers", "--json", "--nats", up2.nats}, extra...)...)
		if err != nil {
			t.Fatalf("servers %v: %v\n%s", extra, err, errOut)
		}
		var rows []serverRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rows {
			m[r.Name] = fmt.Sprintf("%s %d", r.Status, r.Tools)
		}
		return m
	}
	for i := 0; ; i++ {
		reg, cat := rowsOf(), rowsOf("--catalog")
		if fmt.Sprint(reg) == fmt.Sprint(cat) && reg["kb"] == "ready 3" {
			break
		}
		if i == 200 {
			t.Fatalf("the catalog's servers %v, the registry's %v (kb: 3 tools with the one added)", cat, reg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
