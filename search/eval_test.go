package search

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

func TestEvaluate(t *testing.T) {
	lg := math.Log2
	tests := []struct {
		name    string
		results [][]string
		gold    [][][]string
		want    Metrics
	}{
		{
			name:    "two groups hit at 1 and 3",
			results: [][]string{{"a", "x", "b"}},
			gold:    [][][]string{{{"a"}, {"b", "c"}}},
			want: Metrics{Queries: 1, RecallAt1: 0.5, RecallAt5: 1, RecallAt10: 1, CompleteAt5: 1, CompleteAt10: 1,
				NDCGAt10: (1 + 1/lg(4)) / (1 + 1/lg(3)), MRR: 1},
		},
		{
			name:    "one of three groups, by its second member",
			results: [][]string{{"x", "y", "c"}},
			gold:    [][][]string{{{"a"}, {"b", "c"}, {"d"}}},
			want: Metrics{Queries: 1, RecallAt5: 1.0 / 3, RecallAt10: 1.0 / 3,
				NDCGAt10: (1 / lg(4)) / (1 + 1/lg(3) + 1/lg(4)), MRR: 1.0 / 3},
		},
		{
			name:    "group hit at 6: outside @5, inside @10",
			results: [][]string{{"u", "v", "w", "x", "y", "a"}},
			gold:    [][][]string{{{"a"}}},
			want:    Metrics{Queries: 1, RecallAt10: 1, CompleteAt10: 1, NDCGAt10: 1 / lg(7), MRR: 1.0 / 6},
		},
		{
			name:    "a group's first member counts, a later duplicate does not",
			results: [][]string{{"b", "a", "c"}},
			gold:    [][][]string{{{"c", "b"}}},
			want:    Metrics{Queries: 1, RecallAt1: 1, RecallAt5: 1, RecallAt10: 1, CompleteAt5: 1, CompleteAt10: 1, NDCGAt10: 1, MRR: 1},
		},
		{
			name:    "nothing found, missing result list, query without gold skipped",
			results: [][]string{{"x"}},
			gold:    [][][]string{{{"a"}}, {}, {{"b"}}},
			want:    Metrics{Queries: 2},
		},
		{
			name:    "averaged over queries",
			results: [][]string{{"a", "x", "b"}, {"x", "y", "c"}},
			gold:    [][][]string{{{"a"}, {"b", "c"}}, {{"a"}, {"b", "c"}, {"d"}}},
			want: Metrics{Queries: 2, RecallAt1: 0.25, RecallAt5: (1 + 1.0/3) / 2, RecallAt10: (1 + 1.0/3) / 2,
				CompleteAt5: 0.5, CompleteAt10: 0.5,
				NDCGAt10: ((1+1/lg(4))/(1+1/lg(3)) + (1/lg(4))/(1+1/lg(3)+1/lg(4))) / 2, MRR: (1 + 1.0/3) / 2},
		},
		{
			name:    "a duplicate result satisfies one group once and keeps its positions",
			results: [][]string{{"x", "x", "a", "a"}},
			gold:    [][][]string{{{"a"}, {"b"}}},
			want: Metrics{Queries: 1, RecallAt5: 0.5, RecallAt10: 0.5,
				NDCGAt10: (1 / lg(4)) / (1 + 1/lg(3)), MRR: 1.0 / 3},
		},
		{
			name:    "fewer results than groups (small k)",
			results: [][]string{{"b"}},
			gold:    [][][]string{{{"a"}, {"b"}, {"c"}}},
			want: Metrics{Queries: 1, RecallAt1: 1.0 / 3, RecallAt5: 1.0 / 3, RecallAt10: 1.0 / 3,
				NDCGAt10: 1 / (1 + 1/lg(3) + 1/lg(4)), MRR: 1},
		},
		{
			name:    "more than ten groups: ideal DCG capped at ten ranks",
			results: [][]string{{"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9", "g10", "g11"}},
			gold:    [][][]string{{{"g0"}, {"g1"}, {"g2"}, {"g3"}, {"g4"}, {"g5"}, {"g6"}, {"g7"}, {"g8"}, {"g9"}, {"g10"}, {"g11"}}},
			want:    Metrics{Queries: 1, RecallAt1: 1.0 / 12, RecallAt5: 5.0 / 12, RecallAt10: 10.0 / 12, NDCGAt10: 1, MRR: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Evaluate(tt.results, tt.gold)
			if !metricsClose(got, tt.want) {
				t.Errorf("Evaluate =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func metricsClose(a, b Metrics) bool {
	close := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Queries == b.Queries && close(a.RecallAt1, b.RecallAt1) && close(a.RecallAt5, b.RecallAt5) &&
		close(a.RecallAt10, b.RecallAt10) && close(a.CompleteAt5, b.CompleteAt5) &&
		close(a.CompleteAt10, b.CompleteAt10) && close(a.NDCGAt10, b.NDCGAt10) && close(a.MRR, b.MRR)
}

func TestMetricsJSON(t *testing.T) {
	b, err := json.Marshal(Metrics{Queries: 1, RecallAt1: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"queries":1,"recall@1":0.5,"recall@5":0,"recall@10":0,"complete@5":0,"complete@10":0,"ndcg@10":0,"mrr":0}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func ExampleEvaluate() {
	m := Evaluate(
		[][]string{{"fs__read_file", "wiki__search", "fs__write_file"}},
		[][][]string{{{"wiki__search"}, {"fs__write_file", "desktop__write_file"}}},
	)
	fmt.Printf("recall@1 %.2f recall@5 %.2f complete@5 %.0f mrr %.2f\n", m.RecallAt1, m.RecallAt5, m.CompleteAt5, m.MRR)
	// Output: recall@1 0.00 recall@5 1.00 complete@5 1 mrr 0.50
}
