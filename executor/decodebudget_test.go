package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// byteBudget lets large values in up to its total, one past it at a time once room is given
// back, a value larger than the whole budget alone, and small values at once; a waiter whose
// context ends gives back what it collected.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(8 * decodeUnit)
	ctx := context.Background()
	r1, err := b.acquire(ctx, 4*decodeUnit)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.acquire(ctx, 4*decodeUnit-1) // rounds up to 4 units
	if err != nil {
		t.Fatal(err)
	}
	if small, err := b.acquire(ctx, decodeUnit-1); err != nil {
		t.Fatalf("a small value waited: %v", err)
	} else {
		small()
	}

	// Full: a third large value waits, and one whose context ends gives up and takes nothing.
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := b.acquire(cctx, 2*decodeUnit)
		got <- err
	}()
	waitFor(t, "the waiter holds the turn", func() bool { return len(b.turn) == 1 })
	select {
	case err := <-got:
		t.Fatalf("acquired past a full budget (err %v)", err)
	default:
	}
	cancel()
	if err := <-got; err == nil {
		t.Fatal("a cancelled waiter acquired")
	}

	waiting := make(chan func(), 1)
	go func() {
		r, err := b.acquire(ctx, 100*decodeUnit) // larger than the budget: all of it
		if err != nil {
			t.Error(err)
		}
		waiting <- r
	}()
	waitFor(t, "the large waiter holds the turn", func() bool { return len(b.turn) == 1 })
	r1()
	select {
	case <-waiting:
		t.Fatal("a value larger than the budget got in while half of it was held")
	default:
	}
	r2()
	r3 := <-waiting
	if len(b.units) != 0 {
		t.Errorf("%d units free while the whole budget is held", len(b.units))
	}
	r3()
	if len(b.units) != cap(b.units) {
		t.Errorf("%d of %d units free after every release", len(b.units), cap(b.units))
	}
}

// Large arguments are decoded within the process's decode budget: 64 concurrent calls of 4 MiB
// arguments decoded about 100 MB each at once. A call whose large arguments find the budget
// taken waits for it, then runs; small arguments never wait.
func TestLargeArgumentsWaitForDecodeBudget(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	r.waitTool("fixture__echo")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	hold, err := r.ex.decode.acquire(ctx, decodeBudget)
	if err != nil {
		t.Fatal(err)
	}

	if res := r.call("local", "fixture__echo", `{"text":"small"}`); res.Status != subjects.CallOK {
		t.Fatalf("small arguments with the budget taken: %s %+v", res.Status, res.Error)
	}

	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 2*decodeUnit)})
	done := make(chan subjects.CallResult, 1)
	go func() {
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "big-args", Tool: "fixture__echo", Arguments: big})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "the call waits for the decode budget", func() bool { return len(r.ex.decode.turn) == 1 })
	select {
	case res := <-done:
		t.Fatalf("large arguments validated while the budget was taken: %s %+v", res.Status, res.Error)
	case <-time.After(50 * time.Millisecond):
	}
	hold()
	if res := <-done; res.Status != subjects.CallOK {
		t.Fatalf("after the budget was given back: %s %+v", res.Status, res.Error)
	}

	// A call waits for the budget no longer than its timeout: then it is refused, not run.
	hold, err = r.ex.decode.acquire(ctx, decodeBudget)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: "big-args-timeout", Tool: "fixture__echo", Arguments: big, TimeoutMs: 200})
	if err != nil || res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
		t.Fatalf("large arguments with the budget taken past the call's timeout: %v %s %+v, want refused unavailable", err, res.Status, res.Error)
	}
}
