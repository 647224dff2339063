package embeddings

import (
	"math"
	"runtime"
	"strings"
	"testing"
)

// TestDecodeManyItemsBounded: a response is read up to 64 MiB, and json.Unmarshal built every
// item of "data" before its count was checked: {"data":[{},{},...]} for one input made tens of
// bytes of items per byte of body (1.4 GB for a 64 MiB body) before it was refused. Items past
// the count asked for are only counted.
func TestDecodeManyItemsBounded(t *testing.T) {
	const items = 1 << 20
	body := []byte(`{"data":[` + strings.Repeat(`{},`, items-1) + `{}]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	dim := 0
	_, err := decode(body, 1, 0, &dim)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "1048576 embeddings for 1 inputs") {
		t.Fatalf("decode: %v, want the count refused", err)
	}
	t.Logf("%d-byte body: %d bytes allocated", len(body), after.TotalAlloc-before.TotalAlloc)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(2*len(body)) {
		t.Errorf("decoding a %d-byte body allocated %d bytes", len(body), alloc)
	}
}

// FuzzDecode decodes arbitrary response bodies: none may panic, and an accepted one has one
// vector per input, all of one dimension (the one asked for, when given), of finite numbers.
func FuzzDecode(f *testing.F) {
	f.Add(`{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[3,4]}]}`, 2, 0)
	f.Add(`{"data":[{"index":1,"embedding":[1e38,-0]},{"index":0,"embedding":[1.5e-45,2]}]}`, 2, 2)
	f.Add(`{"data":[{},{},{}],"data":null}`, 1, 0)
	f.Add(`{"data":[{"index":0,"embedding":[1,1e39]}]}`, 1, 0)
	f.Add(`{"data":[{"index":0,"embedding":[1,null,"2",[3]]}],"object":"list"}`, 1, 3)
	f.Add(`{"data":"x"}`, 1, 0)
	f.Fuzz(func(t *testing.T, body string, n, want int) {
		n, want = min(max(n, 1), 64), min(max(want, 0), maxDimensions)
		dim := want
		vecs, err := decode([]byte(body), n, 0, &dim)
		if err != nil {
			return
		}
		if len(vecs) != n {
			t.Fatalf("%d vectors for %d inputs", len(vecs), n)
		}
		for i, v := range vecs {
			if len(v) == 0 || len(v) != dim || want != 0 && len(v) != want {
				t.Fatalf("vector %d has %d dimensions (dim %d, asked %d)", i, len(v), dim, want)
			}
			for _, x := range v {
				if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
					t.Fatalf("vector %d holds %v", i, x)
				}
			}
		}
	})
}
