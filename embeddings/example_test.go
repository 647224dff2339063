package embeddings_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mcpstream/mcpstream/embeddings"
)

func ExampleClient_Embed() {
	// A stand-in for an OpenAI-compatible server: the vector of a text is [its length, 1].
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i, text := range req.Input {
			data = append(data, item{i, []float32{float32(len(text)), 1}})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()

	c := &embeddings.Client{BaseURL: srv.URL + "/v1", Model: "text-embedding-3-small", Dimensions: 2}
	vecs, err := c.Embed(context.Background(), []string{"create issue", "get weather"})
	space, _, _ := strings.Cut(c.Name(), "@") // then a hash of the endpoint (a random port here)
	fmt.Println(space, vecs, err)

	// Vectors of another dimension are refused.
	c.Dimensions = 3
	_, err = c.Embed(context.Background(), []string{"create issue"})
	var e *embeddings.Error
	fmt.Println(errors.As(err, &e), e.Code, errors.Is(err, embeddings.ErrEmbeddings))
	// Output:
	// openai-compatible:text-embedding-3-small:2 [[12 1] [11 1]] <nil>
	// true embeddings_malformed true
}
