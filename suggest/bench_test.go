package suggest

import (
	"fmt"
	"testing"
)

// BenchmarkWorstAnswer weighs as many names as one not_found answer may (the callers' budget,
// 5,000), all as close to the key as a hostile server can make them, so that each comparison runs
// its whole band: the most one refusal can cost.
func BenchmarkWorstAnswer(b *testing.B) {
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("get_issue_comments_%d", i)
	}
	key := Key("get_isue_coments_1234")
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			KeyWithin(key, n, MaxDistance)
		}
	}
}
