package embeddings

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestBatchTooLargeLearned: text-embeddings-inference refuses a request of more inputs than its
// --max-client-batch-size (32 by default) with HTTP 413, and the client sent 64. Every Embed of
// more than 32 texts failed, and the catalog then embedded each text alone (64 requests for
// one batch). A batch refused 413 is now sent in halves, and the batch size whose halves went
// through is kept for later calls; a text the endpoint refuses alone is still an error.
func TestBatchTooLargeLearned(t *testing.T) {
	const serverMax = 32
	var mu sync.Mutex
	var sizes []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		sizes = append(sizes, len(req.Input))
		mu.Unlock()
		if len(req.Input) > serverMax {
			http.Error(w, fmt.Sprintf(`{"error":"batch size %d > maximum allowed batch size %d","error_type":"Validation"}`, len(req.Input), serverMax), http.StatusRequestEntityTooLarge)
			return
		}
		var items []string
		for i, in := range req.Input {
			if strings.HasPrefix(in, "too long") {
				http.Error(w, `{"error":"input too long"}`, http.StatusRequestEntityTooLarge)
				return
			}
			items = append(items, fmt.Sprintf(`{"index":%d,"embedding":[1,%d]}`, i, i+1))
		}
		fmt.Fprint(w, `{"data":[`+strings.Join(items, ",")+`]}`)
	}))
	t.Cleanup(srv.Close)
	taken := func() []int {
		mu.Lock()
		defer mu.Unlock()
		s := sizes
		sizes = nil
		return s
	}

	c := &Client{BaseURL: srv.URL, Model: "m"}
	got, err := c.Embed(t.Context(), texts(100))
	if err != nil || len(got) != 100 {
		t.Fatalf("100 texts against an endpoint taking %d per request: %d vectors, %v", serverMax, len(got), err)
	}
	for i, v := range got {
		if want := float32(i%32 + 1); i < 64 && v[1] != want {
			t.Fatalf("vector %d is %v: not in input order", i, v)
		}
	}
	if s := taken(); fmt.Sprint(s) != "[64 32 32 32 4]" {
		t.Errorf("requests of %v inputs: want [64 32 32 32 4] (one refused, halved, then 32 a request)", s)
	}
	if _, err := c.Embed(t.Context(), texts(64)); err != nil {
		t.Fatal(err)
	}
	if s := taken(); fmt.Sprint(s) != "[32 32]" {
		t.Errorf("a later call sent requests of %v inputs: want [32 32], the size learned", s)
	}

	// A text refused alone: the call fails (the catalog then sets that text aside), and the
	// size learned is not lowered for it.
	in := texts(8)
	in[5] = "too long"
	if _, err := c.Embed(t.Context(), in); err == nil {
		t.Error("a text the endpoint refuses alone was embedded")
	}
	taken()
	if _, err := c.Embed(t.Context(), texts(64)); err != nil {
		t.Fatal(err)
	}
	if s := taken(); fmt.Sprint(s) != "[32 32]" {
		t.Errorf("after a text refused alone, requests of %v inputs: want [32 32]", s)
	}
}
