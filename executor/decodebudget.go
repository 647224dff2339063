package executor

import "context"

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
