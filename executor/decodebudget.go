package executor

import (
	"context"
	"sync"
)

// Decoding JSON for schema validation costs far more memory than the JSON: 4 MiB of
// arguments like {"a":[1,1,1,...]} decode to about 100 MB live (212 MB allocated), every
// number a json.Number in an interface. An executor validates up to Workers calls at once
// (arguments and results): 64 hostile 4 MiB requests, or 64 results of a hostile server, would
// need 6 GB. decodeBudget bounds the JSON bytes of large values being decoded and validated
// at once in a process; small values (under decodeUnit) do not count, which bounds them by
// Workers × decodeUnit.
const (
	decodeUnit   = 64 << 10 // values smaller than this are not counted
	decodeBudget = 8 << 20  // large values decoded at once, at most (~200 MB live); at least one is always let in
)

// byteBudget is a weighted semaphore over bytes, in units of decodeUnit. Acquirers take their
// units one at a time, one acquirer at a time (turn), so two large ones never deadlock each
// holding part of what both need.
type byteBudget struct {
	turn  chan struct{} // capacity 1: held by the acquirer collecting units
	units chan struct{} // the free units
}

func newByteBudget(total int) *byteBudget {
	b := &byteBudget{turn: make(chan struct{}, 1), units: make(chan struct{}, max(1, total/decodeUnit))}
	for range cap(b.units) {
		b.units <- struct{}{}
	}
	return b
}

// acquire waits until n bytes may be decoded (at once for n < decodeUnit; a value larger than
// the whole budget takes all of it) and returns the release, or ctx's error.
func (b *byteBudget) acquire(ctx context.Context, n int) (func(), error) {
	if n < decodeUnit {
		return func() {}, nil
	}
	k := min((n+decodeUnit-1)/decodeUnit, cap(b.units))
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.turn }()
	for got := range k {
		select {
		case <-b.units:
		case <-ctx.Done():
			for range got {
				b.units <- struct{}{}
			}
			return nil, ctx.Err()
		}
	}
	return func() {
		for range k {
			b.units <- struct{}{}
		}
	}, nil
}

// decodeHold is the share of the decode budget one value holds while it is decoded and
// validated. Its owner calls end when done with the value; a validation that the wall-clock
// backstop cut off (schema.go, metered) still references the decoded value, and takes the
// share over with keep, giving it back when it ends, so that the budget counts the memory
// still in use.
type decodeHold struct {
	mu      sync.Mutex
	release func() // nil once given back
	kept    bool   // an abandoned validation gives it back
}

func newDecodeHold(release func()) *decodeHold { return &decodeHold{release: release} }

// keep hands the share over to an abandoned validation and returns what it calls when it ends
// (a no-op for a nil hold).
func (h *decodeHold) keep() func() {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	h.kept = true
	h.mu.Unlock()
	return h.giveBack
}

// end gives the share back, unless an abandoned validation kept it.
func (h *decodeHold) end() {
	h.mu.Lock()
	kept := h.kept
	h.mu.Unlock()
	if !kept {
		h.giveBack()
	}
}

func (h *decodeHold) giveBack() {
	h.mu.Lock()
	release := h.release
	h.release = nil
	h.mu.Unlock()
	if release != nil {
		release()
	}
}
