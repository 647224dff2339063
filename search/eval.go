package search

import "math"

// Metrics are retrieval quality figures averaged over queries, as defined in
// testdata/eval/retrieval/PROVENANCE.md (group-aware: a query needs one tool of
// each of its gold groups).
type Metrics struct {
	Queries      int     `json:"queries"`
	RecallAt1    float64 `json:"recall@1"`
	RecallAt5    float64 `json:"recall@5"`
	RecallAt10   float64 `json:"recall@10"`
	CompleteAt5  float64 `json:"complete@5"`
	CompleteAt10 float64 `json:"complete@10"`
	NDCGAt10     float64 `json:"ndcg@10"`
	MRR          float64 `json:"mrr"`
}

// Evaluate scores ranked results against gold groups; results[i] and gold[i]
// belong to query i (a missing results list counts as empty). gold[i] is a
// list of groups, each a list of tool ids any one of which satisfies it.
//
//   - recall@k: share of the query's groups with a member in the top k;
//   - complete@k: 1 when every group has a member in the top k;
//   - nDCG@10: binary gain, one per group, at the rank of its first member in
//     the top 10, normalized by the ideal DCG (groups at ranks 1..min(G,10));
//   - MRR: 1/rank of the first result that belongs to any group, 0 if none.
//
// Queries without gold groups are skipped and not counted.
func Evaluate(results [][]string, gold [][][]string) Metrics {
	var m Metrics
	for i, groups := range gold {
		if len(groups) == 0 {
			continue
		}
		var res []string
		if i < len(results) {
			res = results[i]
		}
		m.Queries++
		rank := map[string]int{} // tool → first rank (1-based)
		for r, id := range res {
			if _, ok := rank[id]; !ok {
				rank[id] = r + 1
			}
		}
		firstAny := 0
		var hit1, hit5, hit10 int
		var dcg float64
		for _, g := range groups {
			first := 0
			for _, id := range g {
				if r, ok := rank[id]; ok && (first == 0 || r < first) {
					first = r
				}
			}
			if first == 0 {
				continue
			}
			if firstAny == 0 || first < firstAny {
				firstAny = first
			}
			if first <= 1 {
				hit1++
			}
			if first <= 5 {
				hit5++
			}
			if first <= 10 {
				hit10++
				dcg += 1 / math.Log2(float64(first)+1)
			}
		}
		var idcg float64
		for r := 1; r <= min(len(groups), 10); r++ {
			idcg += 1 / math.Log2(float64(r)+1)
		}
		g := float64(len(groups))
		m.RecallAt1 += float64(hit1) / g
		m.RecallAt5 += float64(hit5) / g
		m.RecallAt10 += float64(hit10) / g
		if hit5 == len(groups) {
			m.CompleteAt5++
		}
		if hit10 == len(groups) {
			m.CompleteAt10++
		}
		m.NDCGAt10 += math.Min(1, dcg/idcg) // > 1 only if groups overlap
		if firstAny > 0 {
			m.MRR += 1 / float64(firstAny)
		}
	}
	if m.Queries > 0 {
		q := float64(m.Queries)
		m.RecallAt1 /= q
		m.RecallAt5 /= q
		m.RecallAt10 /= q
		m.CompleteAt5 /= q
		m.CompleteAt10 /= q
		m.NDCGAt10 /= q
		m.MRR /= q
	}
	return m
}
