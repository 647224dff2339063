package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evalHybridFiles writes a two-tool catalog and one query for the hybrid eval tests.
func evalHybridFiles(t *testing.T) (tools, queries string) {
	t.Helper()
	dir := t.TempDir()
	tools = filepath.Join(dir, "tools.jsonl")
	os.WriteFile(tools, []byte(
		`{"id":"meteo::get_outlook","server":"meteo","server_description":"Meteorological data","name":"get_outlook","description":"Temperature outlook for a city, sunny or not.","inputSchema":{"type":"object"}}`+"\n"+
			`{"id":"desk::open_incident","server":"desk","server_description":"Service desk","name":"open_incident","description":"Opens an incident for an outage.","inputSchema":{"type":"object"}}`+"\n"), 0o644)
	queries = filepath.Join(dir, "queries.jsonl")
	os.WriteFile(queries, []byte(`{"id":"q1","query":"will it rain tomorrow","gold_groups":[["meteo::get_outlook"]]}`+"\n"), 0o644)
	return tools, queries
}

// TestEvalEmbeddingsRefusedFailsFast: an endpoint that refuses every request (a wrong key) is
// said at once, with its answer. Eval used to wait the whole ten minutes for tool vectors
// that could never come (the indexer retries, and eval's log is discarded), then say only
// "tool embeddings not done".
func TestEvalEmbeddingsRefusedFailsFast(t *testing.T) {
	tools, queries := evalHybridFiles(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"Incorrect API key provided"}}`, http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("MCPSTREAM_TEST_EMBED_KEY", "wrong-key-123")
	_, errOut, err := catRun(t, "eval", "retrieval", "--tools", tools, "--queries", queries,
		"--embeddings-url", srv.URL+"/v1", "--embeddings-model", "m", "--embeddings-key-env", "MCPSTREAM_TEST_EMBED_KEY")
	if err == nil {
		t.Fatal("eval with an endpoint refusing every request: no error")
	}
	if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Incorrect API key") {
		t.Errorf("error %q does not give the endpoint's answer (HTTP 401 and its message)", err)
	}
	if strings.Contains(err.Error()+errOut, "wrong-key-123") {
		t.Errorf("the key leaked: %v\n%s", err, errOut)
	}
}

// TestEvalWarnsLexicalQueries: a query whose embedding fails is ranked lexically (as search
// does); eval measures the hybrid mode, so it says how many queries were not. It used to
// report the mixed figures as hybrid ones, silently.
func TestEvalWarnsLexicalQueries(t *testing.T) {
	tools, queries := evalHybridFiles(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if strings.Contains(strings.Join(req.Input, "\n"), "rain tomorrow") {
			http.Error(w, "overloaded", http.StatusServiceUnavailable) // the query's embedding fails
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i := range req.Input {
			out.Data = append(out.Data, item{Index: i, Embedding: []float32{1, float32(len(req.Input[i]) % 7)}})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	out, errOut, err := catRun(t, "eval", "retrieval", "--tools", tools, "--queries", queries, "--json",
		"--embeddings-url", srv.URL+"/v1", "--embeddings-model", "m")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "1 of 1 queries") || !strings.Contains(errOut, "lexical") {
		t.Errorf("stderr %q does not say that the query was ranked lexically\nstdout: %s", errOut, out)
	}
}
