package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// Calls that end in every way (ok, refused, invalid, timeout, approval timeout, denied, the
// caller gone, rate_limited), each round from principals never seen before: once they are over,
// the executor's goroutines and subscriptions are back where they were.
func TestCallEndingsLeaveNothing(t *testing.T) {
	for _, viaNATS := range []bool{false, true} {
		t.Run(fmt.Sprintf("viaNATS=%v", viaNATS), func(t *testing.T) { callEndingsLeaveNothing(t, viaNATS) })
	}
}

func callEndingsLeaveNothing(t *testing.T, viaNATS bool) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true, viaNATS: viaNATS})
	enc := r.env.Connect(t)
	cfg := Config{Workers: 4, Limits: Limits{Tools: map[string]Rate{"fixture__fail": {PerSecond: 0.001, Burst: 1}}}}
	if !viaNATS {
		cfg = r.managerConfig(cfg)
	}
	ex := r.startExecutor(cfg, enc)
	r.waitTool("fixture__echo")
	call := func(ctx context.Context, user, tool, args string, mod func(*subjects.CallRequest)) (subjects.CallResult, error) {
		req := subjects.CallRequest{ID: NewCallID(), Tool: tool, Principal: subjects.Principal{User: user}}
		if args != "" {
			req.Arguments = json.RawMessage(args)
		}
		if mod != nil {
			mod(&req)
		}
		return r.client.Call(ctx, "local", req)
	}
	round := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		user := fmt.Sprintf("made-up-user-%d", i)
		var wg sync.WaitGroup
		want := func(tool, args, status, code string, mod func(*subjects.CallRequest)) {
			wg.Go(func() {
				res, err := call(ctx, user, tool, args, mod)
				if err != nil {
					t.Errorf("%s: %v", tool, err)
					return
				}
				got := res.Status
				if res.Error != nil {
					got = res.Error.Code
				}
				if got != status && got != code {
					t.Errorf("%s: got %s %+v, want %s/%s", tool, res.Status, res.Error, status, code)
				}
			})
		}
		want("fixture__echo", `{"text":"x"}`, subjects.CallOK, "", nil)
		want("fixture__nosuch", `{}`, "", subjects.CodeNotFound, nil)
		want("fixture__echo", `{}`, "", subjects.CodeInvalidArguments, nil)
		want("fixture__fail", `{}`, subjects.CallOK, subjects.CodeRateLimited, nil)
		want("fixture__slow", `{"ms":5000}`, "", subjects.CodeTimeout, func(c *subjects.CallRequest) { c.TimeoutMs = 50 })
		want("fixture__wipe", ``, "", subjects.CodeApprovalTimeout, func(c *subjects.CallRequest) { c.ApprovalTimeoutMs = 50 })
		// Denied: decided as soon as someone waits for it.
		wg.Go(func() {
			id := NewCallID()
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__wipe", Principal: subjects.Principal{User: user}})
				if err != nil || res.Error == nil || res.Error.Code != subjects.CodeDenied {
					t.Errorf("denied wipe: %+v %v", res, err)
				}
			}()
			for {
				rep, err := r.client.Decide(ctx, subjects.Approval{ID: id, Approve: false, By: "ops"})
				if err == nil && rep.OK {
					break
				}
				if ctx.Err() != nil {
					t.Errorf("decide: %v", err)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			<-done
		})
		// The caller gone mid-call.
		wg.Go(func() {
			short, stop := context.WithTimeout(ctx, 30*time.Millisecond)
			defer stop()
			_, _ = call(short, user, "fixture__slow", `{"ms":200}`, nil)
		})
		wg.Wait()
	}
	settle := func() {
		r.waitCallsSettled(context.Background())
		waitFor(t, "the front end holds no waiting call", func() bool { return len(ex.execSem) == 0 })
		waitFor(t, "no call in flight", func() bool {
			ex.flight.mu.Lock()
			defer ex.flight.mu.Unlock()
			return len(ex.flight.items) == 0
		})
		waitFor(t, "no approval wait place held", func() bool { return len(ex.approvalWaits) == 0 })
		waitFor(t, "no tenant holds a waiting place", func() bool {
			ex.execWaiting.mu.Lock()
			defer ex.execWaiting.mu.Unlock()
			return len(ex.execWaiting.n) == 0
		})
	}
	round(0)
	round(1)
	settle()
	goBefore, subsBefore := runtime.NumGoroutine(), enc.NumSubscriptions()
	const rounds = 20
	for i := 2; i < 2+rounds; i++ {
		round(i)
	}
	settle()
	deadline := time.Now().Add(waitLimit)
	var n, s int
	for {
		n, s = runtime.NumGoroutine(), enc.NumSubscriptions()
		if n <= goBefore+10 && s <= subsBefore+2 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Errorf("after %d rounds: %d goroutines (%d before), %d executor subscriptions (%d before)\n%s",
		rounds, n, goBefore, s, subsBefore, buf[:runtime.Stack(buf, true)])
}
