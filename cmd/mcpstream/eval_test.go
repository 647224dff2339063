package main

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpstream/mcpstream/search"
)

func TestEvalRetrieval(t *testing.T) {
	out, errOut, err := catRun(t, "eval", "retrieval", "--tools", "testdata/eval_tools.jsonl",
		"--queries", "testdata/eval_queries.jsonl", "--json")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	var got map[string]float64
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out)
	}
	for _, key := range []string{"queries", "recall@1", "recall@5", "recall@10", "complete@5", "complete@10", "ndcg@10", "mrr"} {
		if _, ok := got[key]; !ok {
			t.Errorf("no %q in %s", key, out)
		}
	}
	// q1, q2 and q3 find all their gold tools in the top 5 (q2's two groups count as one query);
	// q4 finds nothing (the score floor); q5 has no gold and does not count.
	if got["queries"] != 4 {
		t.Errorf("queries = %v, want 4", got["queries"])
	}
	if r := got["recall@5"]; math.Abs(r-0.75) > 1e-9 {
		t.Errorf("recall@5 = %v, want 0.75", r)
	}
	if c := got["complete@5"]; math.Abs(c-0.75) > 1e-9 {
		t.Errorf("complete@5 = %v, want 0.75", c)
	}

	// Per query and text output.
	out, _, err = catRun(t, "eval", "retrieval", "--tools", "testdata/eval_tools.jsonl",
		"--queries", "testdata/eval_queries.jsonl", "--per-query")
	if err != nil || !strings.Contains(out, "q1 open an issue") || !strings.Contains(out, "* 1 github__create_issue") ||
		!strings.Contains(out, "recall@5") {
		t.Errorf("text output: %v\n%s", err, out)
	}
}

func TestEvalRetrievalErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"id\":\"x\",\"server\":\"s\",\"name\":\"n\"}\nnot json\n"), 0o644)
	badGold := filepath.Join(dir, "gold.jsonl")
	os.WriteFile(badGold, []byte(`{"id":"q","query":"x","gold_groups":[["no-separator"]]}`+"\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"eval"}, ""},
		{"missing queries", []string{"eval", "retrieval", "--tools", "testdata/eval_tools.jsonl"}, ""},
		{"bad line", []string{"eval", "retrieval", "--tools", bad, "--queries", "testdata/eval_queries.jsonl"}, "bad.jsonl:2"},
		{"bad gold", []string{"eval", "retrieval", "--tools", "testdata/eval_tools.jsonl", "--queries", badGold}, "server::name"},
		{"missing file", []string{"eval", "retrieval", "--tools", filepath.Join(dir, "none"), "--queries", badGold}, "no such file"},
		{"bad k", []string{"eval", "retrieval", "--tools", "testdata/eval_tools.jsonl", "--queries", badGold, "--k", "0"}, ""}, // a usage error
	}
	for _, tt := range tests {
		_, _, err := catRun(t, tt.args...)
		var code exitCode
		switch {
		case err == nil:
			t.Errorf("%s: no error", tt.name)
		case tt.want == "" && !(errors.As(err, &code) && code == 2):
			t.Errorf("%s: %v, want exit status 2", tt.name, err)
		case tt.want != "" && !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestEvalRetrievalDev runs the development queries (testdata/eval/retrieval, the repository's
// copy of shared/eval/retrieval) through the real path and guards the acceptance floor.
func TestEvalRetrievalDev(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "eval", "retrieval")
	out, errOut, err := catRun(t, "eval", "retrieval", "--tools", filepath.Join(dir, "tools.jsonl"),
		"--queries", filepath.Join(dir, "queries-dev.jsonl"), "--json")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	var m search.Metrics
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("queries-dev through NATS and an indexer replica: %+v", m)
	if m.Queries != 50 || m.RecallAt5 < 0.45 {
		t.Errorf("queries %d, recall@5 %.3f (want 50 and >= 0.45)", m.Queries, m.RecallAt5)
	}
}

// conceptEmbeddings serves POST /v1/embeddings (the OpenAI shape) on 127.0.0.1 with one
// dimension per concept; words of a concept share no letters, so only vectors relate them.
func conceptEmbeddings(t *testing.T) (url string, requests *atomic.Int64) {
	t.Helper()
	concepts := [][]string{
		{"weather", "forecast", "rain", "umbrella", "sunny", "temperature"},
		{"ticket", "issue", "incident", "outage"},
	}
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k-123" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "concepts" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i, text := range req.Input {
			v := make([]float32, len(concepts)+1)
			v[len(concepts)] = 0.05
			for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
				for c, words := range concepts {
					if slices.Contains(words, word) {
						v[c]++
					}
				}
			}
			out.Data = append(out.Data, item{Index: i, Embedding: v})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", requests
}

// TestEvalRetrievalHybrid: with an embeddings endpoint, a query that shares no word with its
// gold tool finds it (through vectors); without, it finds nothing.
func TestEvalRetrievalHybrid(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.jsonl")
	os.WriteFile(tools, []byte(
		`{"id":"meteo::get_outlook","server":"meteo","server_description":"Meteorological data","name":"get_outlook","description":"Temperature outlook for a city, sunny or not.","inputSchema":{"type":"object"}}`+"\n"+
			`{"id":"desk::open_incident","server":"desk","server_description":"Service desk","name":"open_incident","description":"Opens an incident for an outage.","inputSchema":{"type":"object"}}`+"\n"), 0o644)
	queries := filepath.Join(dir, "queries.jsonl")
	os.WriteFile(queries, []byte(`{"id":"q1","query":"will it rain tomorrow","gold_groups":[["meteo::get_outlook"]]}`+"\n"), 0o644)
	recall1 := func(args ...string) float64 {
		t.Helper()
		out, errOut, err := catRun(t, append([]string{"eval", "retrieval", "--tools", tools, "--queries", queries, "--json"}, args...)...)
		if err != nil {
			t.Fatalf("eval %v: %v\n%s", args, err, errOut)
		}
		var got map[string]float64
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return got["recall@1"]
	}
	if r := recall1(); r != 0 {
		t.Errorf("lexical recall@1 = %v, want 0 (no shared word)", r)
	}
	url, requests := conceptEmbeddings(t)
	t.Setenv("MCPSTREAM_TEST_EMBED_KEY", "k-123")
	if r := recall1("--embeddings-url", url, "--embeddings-model", "concepts", "--embeddings-key-env", "MCPSTREAM_TEST_EMBED_KEY"); r != 1 {
		t.Errorf("hybrid recall@1 = %v, want 1", r)
	}
	if requests.Load() < 2 { // the tools, then the query
		t.Errorf("%d embeddings requests, want at least 2", requests.Load())
	}
	if _, _, err := catRun(t, "eval", "retrieval", "--tools", tools, "--queries", queries, "--embeddings-url", url); err == nil {
		t.Error("--embeddings-url without --embeddings-model: no error")
	}
}

// TestEvalRetrievalDegenerateEndpoint: an endpoint that answers the same vector for every text
// answers eval's first request; the replica then refuses it at its probe (see
// indexer.CheckEmbedder) and retries without end, and eval waited its ten minutes for tool
// vectors that could not come, saying nothing of why. It stops at once with the reason.
func TestEvalRetrievalDegenerateEndpoint(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.jsonl")
	os.WriteFile(tools, []byte(`{"id":"meteo::get_outlook","server":"meteo","name":"get_outlook","description":"Temperature outlook.","inputSchema":{"type":"object"}}`+"\n"), 0o644)
	queries := filepath.Join(dir, "queries.jsonl")
	os.WriteFile(queries, []byte(`{"id":"q1","query":"will it rain tomorrow","gold_groups":[["meteo::get_outlook"]]}`+"\n"), 0o644)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		data := make([]map[string]any, len(req.Input))
		for i := range data {
			data[i] = map[string]any{"index": i, "embedding": []float32{0.5, 0.5, 0.1}}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	_, errOut, err := catRun(t, "eval", "retrieval", "--tools", tools, "--queries", queries, "--embeddings-url", srv.URL+"/v1", "--embeddings-model", "constant")
	if err == nil || !strings.Contains(err.Error()+errOut, "same direction") {
		t.Errorf("eval with an endpoint answering one vector for every text: %v %s, want an error saying so", err, errOut)
	}
}
