package embeddings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

const testKey = "sk-secret-0123456789"

// recorded is one request the fake server received.
type recorded struct {
	method, path, query, auth, contentType string
	fields                                 map[string]json.RawMessage // the body's top-level fields
	input                                  []string
}

// fakeServer answers POSTs with reply (call counts from 0) and records the requests.
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newFake(t *testing.T, reply func(call int, r *http.Request, input []string) (status int, body string)) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recorded{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")}
		if err := json.NewDecoder(r.Body).Decode(&rec.fields); err != nil {
			t.Errorf("request body: %v", err)
		}
		if err := json.Unmarshal(rec.fields["input"], &rec.input); err != nil {
			t.Errorf("request input: %v", err)
		}
		f.mu.Lock()
		call := len(f.reqs)
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		status, body := reply(call, r, rec.input)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// dataBody is a response listing vecs (vecs[i] has index i) in the given order.
func dataBody(vecs [][]float32, order []int) string {
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	items := make([]item, 0, len(vecs))
	for _, i := range order {
		items = append(items, item{"embedding", i, vecs[i]})
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": items, "model": "m",
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
	return string(b)
}

// numbered answers "t17" with [17, 0.5, -1], listing the data in a shuffled order.
func numbered(call int, _ *http.Request, input []string) (int, string) {
	vecs := make([][]float32, len(input))
	for i, text := range input {
		n, _ := strconv.Atoi(strings.TrimPrefix(text, "t"))
		vecs[i] = []float32{float32(n), 0.5, -1}
	}
	return http.StatusOK, dataBody(vecs, rand.New(rand.NewPCG(uint64(call), 7)).Perm(len(input)))
}

// constant answers every input with a vector of dim dimensions.
func constant(dim int) func(int, *http.Request, []string) (int, string) {
	return func(_ int, _ *http.Request, input []string) (int, string) {
		vecs := make([][]float32, len(input))
		for i := range vecs {
			vecs[i] = make([]float32, dim)
		}
		return http.StatusOK, dataBody(vecs, rand.Perm(len(input)))
	}
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "t" + strconv.Itoa(i)
	}
	return out
}

// asError returns err as an *Error after checking it matches ErrEmbeddings.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want an *Error", err, err)
	}
	if !errors.Is(err, ErrEmbeddings) {
		t.Errorf("errors.Is(%v, ErrEmbeddings) = false, want true", err)
	}
	return e
}

func TestEmbedBatches(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		maxBatch  int
		wantSizes []int
	}{
		{"150 inputs by 64", 150, 64, []int{64, 64, 22}},
		{"default batch of 64", 65, 0, []int{64, 1}},
		{"one batch", 150, 1000, []int{150}},
		{"one input", 1, 64, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, numbered)
			c := &Client{BaseURL: srv.URL + "/v1", Model: "text-embedding-3-small", MaxBatch: tt.maxBatch}
			got, err := c.Embed(t.Context(), texts(tt.n))
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d vectors, want %d", len(got), tt.n)
			}
			for i, v := range got {
				if want := []float32{float32(i), 0.5, -1}; !slices.Equal(v, want) {
					t.Fatalf("vector %d = %v, want %v", i, v, want)
				}
			}
			var sizes []int
			for _, r := range srv.requests() {
				sizes = append(sizes, len(r.input))
			}
			if !slices.Equal(sizes, tt.wantSizes) {
				t.Errorf("batch sizes = %v, want %v", sizes, tt.wantSizes)
			}
		})
	}
}

func TestEmbedRequest(t *testing.T) {
	tests := []struct {
		name       string
		baseSuffix string
		apiKey     string
		dimensions int
		texts      []string
		wantPath   string
		wantQuery  string
		wantAuth   string
		wantDims   string // the raw "dimensions" field; "" when absent
	}{
		{name: "no key", baseSuffix: "/v1", texts: []string{"a"}, wantPath: "/v1/embeddings"},
		{name: "key", baseSuffix: "/v1", apiKey: testKey, texts: []string{"a"}, wantPath: "/v1/embeddings", wantAuth: "Bearer " + testKey},
		{name: "dimensions", baseSuffix: "/v1", dimensions: 3, texts: []string{"a"}, wantPath: "/v1/embeddings", wantDims: "3"},
		{name: "trailing slash", baseSuffix: "/v1/", texts: []string{"a"}, wantPath: "/v1/embeddings"},
		{name: "no path", baseSuffix: "", texts: []string{"a"}, wantPath: "/embeddings"},
		{name: "query kept", baseSuffix: "/openai?api-version=2", texts: []string{"a"}, wantPath: "/openai/embeddings", wantQuery: "api-version=2"},
		{name: "empty string input", baseSuffix: "/v1", texts: []string{"", "x", ""}, wantPath: "/v1/embeddings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, constant(3))
			c := &Client{BaseURL: srv.URL + tt.baseSuffix, Model: "m1", APIKey: tt.apiKey, Dimensions: tt.dimensions, HTTP: srv.Client()}
			got, err := c.Embed(t.Context(), tt.texts)
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != len(tt.texts) {
				t.Errorf("got %d vectors, want %d", len(got), len(tt.texts))
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			checks := []struct{ what, got, want string }{
				{"method", r.method, http.MethodPost},
				{"path", r.path, tt.wantPath},
				{"query", r.query, tt.wantQuery},
				{"Content-Type", r.contentType, "application/json"},
				{"Authorization", r.auth, tt.wantAuth},
				{"model", string(r.fields["model"]), `"m1"`},
				{"encoding_format", string(r.fields["encoding_format"]), `"float"`},
				{"dimensions", string(r.fields["dimensions"]), tt.wantDims},
			}
			for _, ch := range checks {
				if ch.got != ch.want {
					t.Errorf("%s = %q, want %q", ch.what, ch.got, ch.want)
				}
			}
			if !slices.Equal(r.input, tt.texts) {
				t.Errorf("input = %q, want %q", r.input, tt.texts)
			}
			if len(r.fields) != 3+min(1, len(tt.wantDims)) {
				t.Errorf("request fields = %v, want model, input, encoding_format (and dimensions)", r.fields)
			}
		})
	}
}

func TestEmbedEmpty(t *testing.T) {
	srv := newFake(t, constant(3))
	c := &Client{BaseURL: srv.URL, Model: "m"}
	for _, in := range [][]string{nil, {}} {
		got, err := c.Embed(t.Context(), in)
		if got != nil || err != nil {
			t.Errorf("Embed(%#v) = %v, %v; want nil, nil", in, got, err)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestEmbedStatus(t *testing.T) {
	tests := []struct {
		status   int
		wantCode string
	}{
		{http.StatusBadRequest, CodeRejected},
		{http.StatusUnauthorized, CodeRejected},
		{http.StatusForbidden, CodeRejected},
		{http.StatusNotFound, CodeRejected},
		{http.StatusUnprocessableEntity, CodeRejected},
		{http.StatusRequestTimeout, CodeUnavailable},
		{http.StatusTooManyRequests, CodeUnavailable},
		{http.StatusInternalServerError, CodeUnavailable},
		{http.StatusBadGateway, CodeUnavailable},
		{http.StatusServiceUnavailable, CodeUnavailable},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			// The server echoes the credentials, with control characters and a long tail.
			srv := newFake(t, func(_ int, r *http.Request, _ []string) (int, string) {
				return tt.status, `{"error":{"message":"Incorrect API key provided: ` + r.Header.Get("Authorization") +
					"\x00\x1b[31m\r\n" + strings.Repeat("x", 500) + `"}}`
			})
			c := &Client{BaseURL: srv.URL + "/v1", Model: "m", APIKey: testKey}
			got, err := c.Embed(t.Context(), texts(3))
			if got != nil {
				t.Errorf("got %v, want nil", got)
			}
			e := asError(t, err)
			if e.Code != tt.wantCode || e.Status != tt.status {
				t.Errorf("code, status = %s, %d; want %s, %d", e.Code, e.Status, tt.wantCode, tt.status)
			}
			text := err.Error()
			if strings.Contains(text, testKey) {
				t.Errorf("error %q holds the API key", text)
			}
			wantPrefix := fmt.Sprintf("embeddings: %s: HTTP %d %s: {\"error\":{\"message\":\"Incorrect API key provided: Bearer [redacted]??[31m  xxx",
				tt.wantCode, tt.status, http.StatusText(tt.status))
			if !strings.HasPrefix(text, wantPrefix) {
				t.Errorf("error = %q, want prefix %q", text, wantPrefix)
			}
			if body := e.Message[strings.Index(e.Message, ": ")+2:]; len(body) > maxSnippet+len("...") {
				t.Errorf("quoted body is %d bytes, want at most %d + \"...\"", len(body), maxSnippet)
			}
		})
	}
}

func TestSnippet(t *testing.T) {
	tests := []struct {
		name, key, body, want string
	}{
		{"plain", testKey, `{"error":"bad model"}`, `{"error":"bad model"}`},
		{"empty", testKey, "", ""},
		{"control characters", "", "a\x00b\x1bc\nd\te\x7f \n", "a?b?c d e?"},
		{"format characters", "", "abc\u202edef\u200b", "abc?def?"},
		{"invalid UTF-8", "", "a\xff\xfeb", "a??b"},
		{"key", testKey, "x " + testKey + " y " + testKey, "x [redacted] y [redacted]"},
		{"key made by the replacement", "k?ey-42", "k\x01ey-42", "[redacted]"},
		{"key with a control character", "k\x01ey-42", "k\x01ey-42!", "[redacted]!"},
		{"key across the cut", testKey, strings.Repeat("a", 195) + testKey, strings.Repeat("a", 195) + "[reda..."},
		{"cut on a character boundary", "", "a" + strings.Repeat("é", 150), "a" + strings.Repeat("é", 99) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{APIKey: tt.key}
			got := c.snippet([]byte(tt.body))
			if got != tt.want {
				t.Errorf("snippet = %q, want %q", got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("snippet %q is not valid UTF-8", got)
			}
		})
	}
}

// item is one raw "data" element.
func item(index int, embedding string) string {
	return fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, index, embedding)
}

// data is a raw response holding items.
func data(items ...string) string {
	return `{"object":"list","data":[` + strings.Join(items, ",") + `]}`
}

func zeros(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]" }

func TestEmbedMalformed(t *testing.T) {
	tests := []struct {
		name       string
		n          int
		maxBatch   int
		dimensions int
		body       func(call int) string
		wantMsg    string
	}{
		{name: "not JSON", n: 1, body: func(int) string { return "not json" }, wantMsg: "decoding the response"},
		{name: "empty body", n: 1, body: func(int) string { return "" }, wantMsg: "decoding the response"},
		{name: "array", n: 1, body: func(int) string { return "[]" }, wantMsg: "decoding the response"},
		{name: "error object", n: 1, body: func(int) string { return `{"error":{"message":"oops"}}` }, wantMsg: "0 embeddings for 1 inputs"},
		{name: "too few", n: 2, body: func(int) string { return data(item(0, "[1]")) }, wantMsg: "1 embeddings for 2 inputs"},
		{name: "too many", n: 2, body: func(int) string { return data(item(0, "[1]"), item(1, "[1]"), item(2, "[1]")) }, wantMsg: "3 embeddings for 2 inputs"},
		{name: "duplicate index", n: 2, body: func(int) string { return data(item(1, "[1]"), item(1, "[1]")) }, wantMsg: "repeats index 1"},
		{name: "index out of range", n: 2, body: func(int) string { return data(item(0, "[1]"), item(2, "[1]")) }, wantMsg: "index 2, want [0, 2)"},
		{name: "negative index", n: 2, body: func(int) string { return data(item(-1, "[1]"), item(0, "[1]")) }, wantMsg: "index -1"},
		{name: "missing index", n: 1, body: func(int) string { return data(`{"embedding":[1]}`) }, wantMsg: "no index"},
		{name: "null index", n: 1, body: func(int) string { return data(`{"index":null,"embedding":[1]}`) }, wantMsg: "no index"},
		{name: "fractional index", n: 1, body: func(int) string { return data(`{"index":0.5,"embedding":[1]}`) }, wantMsg: "decoding the response"},
		{name: "empty embedding", n: 1, body: func(int) string { return data(item(0, "[]")) }, wantMsg: "input 0 is empty"},
		{name: "missing embedding", n: 1, body: func(int) string { return data(`{"index":0}`) }, wantMsg: "input 0 is empty"},
		{name: "null embedding", n: 1, body: func(int) string { return data(item(0, "null")) }, wantMsg: "not an array of numbers"},
		{name: "base64 embedding", n: 1, body: func(int) string { return data(item(0, `"AACAPw=="`)) }, wantMsg: "not an array of numbers"},
		{name: "null value", n: 1, body: func(int) string { return data(item(0, "[1,null]")) }, wantMsg: "not an array of numbers"},
		{name: "string value", n: 1, body: func(int) string { return data(item(0, `[1,"2"]`)) }, wantMsg: "not an array of numbers"},
		{name: "boolean value", n: 1, body: func(int) string { return data(item(0, `[true]`)) }, wantMsg: "not an array of numbers"},
		{name: "nested arrays", n: 1, body: func(int) string { return data(item(0, "[[1,2],[3]]")) }, wantMsg: "not an array of numbers"},
		{name: "object value", n: 1, body: func(int) string { return data(item(0, `[{"a":1}]`)) }, wantMsg: "not an array of numbers"},
		{name: "beyond float32", n: 1, body: func(int) string { return data(item(0, "[1,1e39]")) }, wantMsg: "1e39 is not a float32"},
		{name: "too many dimensions", n: 1, body: func(int) string { return data(item(0, zeros(maxDimensions+1))) }, wantMsg: "more than 16384"},
		{name: "mixed dimensions in a batch", n: 3, body: func(int) string { return data(item(0, "[1,2]"), item(1, "[1,2]"), item(2, "[1]")) },
			wantMsg: "input 2 has 1 dimensions, want 2"},
		{name: "mixed dimensions across batches", n: 4, maxBatch: 2, body: func(call int) string {
			return data(item(0, zeros(2+call)), item(1, zeros(2+call)))
		}, wantMsg: "input 2 has 3 dimensions, want 2"},
		{name: "not the requested dimensions", n: 2, dimensions: 3, body: func(int) string { return data(item(0, "[1,2]"), item(1, "[1,2]")) },
			wantMsg: "input 0 has 2 dimensions, want 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, func(call int, _ *http.Request, _ []string) (int, string) { return http.StatusOK, tt.body(call) })
			c := &Client{BaseURL: srv.URL, Model: "m", MaxBatch: tt.maxBatch, Dimensions: tt.dimensions}
			got, err := c.Embed(t.Context(), texts(tt.n))
			if got != nil {
				t.Errorf("got %v, want nil", got)
			}
			e := asError(t, err)
			if e.Code != CodeMalformed || e.Status != http.StatusOK {
				t.Errorf("code, status = %s, %d; want %s, 200", e.Code, e.Status, CodeMalformed)
			}
			if !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.wantMsg)
			}
		})
	}
}

func TestEmbedAccepts(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   [][]float32
	}{
		{"reversed, spaced numbers", http.StatusOK,
			`{"data":[ {"index":1,"embedding":[ 1 , -2.5E+3 ,0.1e-2 ]}, {"embedding":[0,-0,1e-50],"index":0,"extra":{}} ],"usage":null}`,
			[][]float32{{0, 0, 0}, {1, -2500, 0.001}}},
		{"201 and the most dimensions", http.StatusCreated, data(item(0, zeros(maxDimensions)), item(1, zeros(maxDimensions))),
			[][]float32{make([]float32, maxDimensions), make([]float32, maxDimensions)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, func(int, *http.Request, []string) (int, string) { return tt.status, tt.body })
			c := &Client{BaseURL: srv.URL, Model: "m"}
			got, err := c.Embed(t.Context(), texts(2))
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEmbedBodyLimit(t *testing.T) {
	valid := data(item(0, "[1,2]"))
	const limit = 64 << 10
	padded := valid + strings.Repeat(" ", limit-len(valid)) // exactly limit bytes
	tests := []struct {
		name    string
		maxBody int64 // 0: the real 64 MiB cap
		handler http.HandlerFunc
		wantErr bool
	}{
		{"exactly the cap", limit, func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush() // chunked: no Content-Length, the read enforces the cap
			fmt.Fprint(w, padded)
		}, false},
		{"one byte over", limit - 1, func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
			fmt.Fprint(w, padded)
		}, true},
		{"streamed far over", limit, func(w http.ResponseWriter, _ *http.Request) {
			// A lazy, endless-looking embedding; stops when the client hangs up (or at 1 MiB).
			fmt.Fprint(w, `{"data":[{"index":0,"embedding":[`)
			chunk := strings.Repeat("0,", 512)
			for written := 0; written < 1<<20; written += len(chunk) {
				if _, err := fmt.Fprint(w, chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}, true},
		{"declared over the default cap", 0, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(maxResponseBytes+1))
			fmt.Fprint(w, `{"data":[`) // the rest never comes: the length alone is refused
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			c := &Client{BaseURL: srv.URL, Model: "m", maxBody: tt.maxBody}
			got, err := c.Embed(t.Context(), texts(1))
			if !tt.wantErr {
				if err != nil || len(got) != 1 {
					t.Fatalf("Embed = %v, %v; want one vector", got, err)
				}
				return
			}
			e := asError(t, err)
			if e.Code != CodeMalformed || !strings.Contains(e.Message, "exceeds") {
				t.Errorf("error = %v, want %s exceeding the cap", err, CodeMalformed)
			}
		})
	}
}

// cancelAfter is a transport that cancels the request's context once the response headers
// are in, so that the body read is what fails.
type cancelAfter struct {
	base   http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	c.cancel()
	return resp, err
}

func TestEmbedContext(t *testing.T) {
	tests := []struct {
		name string
		// run calls Embed with c and returns its error; got is closed when the server has
		// the request.
		run          func(t *testing.T, c *Client, got <-chan struct{}) error
		wantRequests int
		wantIs       error
		wantMsg      string
	}{
		{"cancelled before", func(t *testing.T, c *Client, _ <-chan struct{}) error {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := c.Embed(ctx, texts(1))
			return err
		}, 0, context.Canceled, "context canceled"},
		{"deadline passed", func(t *testing.T, c *Client, _ <-chan struct{}) error {
			ctx, cancel := context.WithDeadline(t.Context(), time.Unix(1, 0))
			defer cancel()
			_, err := c.Embed(ctx, texts(1))
			return err
		}, 0, context.DeadlineExceeded, "context deadline exceeded"},
		{"cancelled while waiting", func(t *testing.T, c *Client, got <-chan struct{}) error {
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-got; cancel() }()
			_, err := c.Embed(ctx, texts(1))
			return err
		}, 1, context.Canceled, "Post "},
		{"cancelled while reading", func(t *testing.T, c *Client, _ <-chan struct{}) error {
			ctx, cancel := context.WithCancel(t.Context())
			c.HTTP = &http.Client{Transport: cancelAfter{http.DefaultTransport, cancel}}
			_, err := c.Embed(ctx, texts(1))
			return err
		}, 1, context.Canceled, "reading the response"},
		{"http.Client timeout", func(t *testing.T, c *Client, _ <-chan struct{}) error {
			c.HTTP = &http.Client{Timeout: time.Millisecond} // the server never answers
			_, err := c.Embed(t.Context(), texts(1))
			return err
		}, -1, context.DeadlineExceeded, "Client.Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			var mu sync.Mutex
			requests := 0
			// The server sends the headers and the start of a body, then waits for the client
			// to go away (or the test to end). For "cancelled while waiting" it sends nothing:
			// the client must still be waiting for the response when it cancels.
			waiting := tt.wantMsg == "Post "
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests++
				mu.Unlock()
				if !waiting {
					fmt.Fprint(w, `{"data":[`)
					w.(http.Flusher).Flush()
				}
				once.Do(func() { close(got) })
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) }) // runs first
			c := &Client{BaseURL: srv.URL, Model: "m", APIKey: testKey}
			err := tt.run(t, c, got)
			e := asError(t, err)
			if e.Code != CodeUnavailable || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("code, message = %s, %q; want %s, containing %q", e.Code, e.Message, CodeUnavailable, tt.wantMsg)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tt.wantIs)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q holds the API key", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.wantRequests >= 0 && requests != tt.wantRequests {
				t.Errorf("got %d requests, want %d", requests, tt.wantRequests)
			}
		})
	}
}

func TestEmbedTransportFailure(t *testing.T) {
	// The server hangs up without answering.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	c := &Client{BaseURL: srv.URL, Model: "m"}
	_, err := c.Embed(t.Context(), texts(1))
	e := asError(t, err)
	if e.Code != CodeUnavailable || e.Status != 0 {
		t.Errorf("code, status = %s, %d; want %s, 0", e.Code, e.Status, CodeUnavailable)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v matches a context error, want not", err)
	}
}

func TestEmbedConfig(t *testing.T) {
	srv := newFake(t, constant(3))
	tests := []struct {
		name   string
		client Client
	}{
		{"zero value", Client{}},
		{"no BaseURL", Client{Model: "m"}},
		{"no Model", Client{BaseURL: srv.URL}},
		{"unparsable URL", Client{BaseURL: "://v1", Model: "m"}},
		{"no scheme", Client{BaseURL: "127.0.0.1:8080/v1", Model: "m"}},
		{"ftp", Client{BaseURL: "ftp://127.0.0.1/v1", Model: "m"}},
		{"no host", Client{BaseURL: "http:///v1", Model: "m"}},
		{"password and bad port", Client{BaseURL: "http://user:" + testKey + "@127.0.0.1:port/v1", Model: "m"}},
		{"negative Dimensions", Client{BaseURL: srv.URL, Model: "m", Dimensions: -1}},
		{"negative MaxBatch", Client{BaseURL: srv.URL, Model: "m", MaxBatch: -1}},
		// A key read from a file with its line break: net/http refuses to send it, which
		// was a transport failure (embeddings_unavailable, retried without end).
		{"line break in APIKey", Client{BaseURL: srv.URL, Model: "m", APIKey: testKey + "\n"}},
		{"control character in APIKey", Client{BaseURL: srv.URL, Model: "m", APIKey: testKey + "\x7f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, in := range [][]string{texts(1), nil} {
				got, err := tt.client.Embed(t.Context(), in)
				if got != nil {
					t.Errorf("got %v, want nil", got)
				}
				e := asError(t, err)
				if e.Code != CodeConfig || e.Status != 0 {
					t.Errorf("code, status = %s, %d; want %s, 0", e.Code, e.Status, CodeConfig)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("error %q holds the password", err)
				}
			}
		})
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestName(t *testing.T) {
	const openai = "@d9617135d6fdd0a2" // https://api.openai.com/v1
	tests := []struct {
		client Client
		want   string
	}{
		{Client{Model: "text-embedding-3-small", BaseURL: "https://api.openai.com/v1"}, "openai-compatible:text-embedding-3-small" + openai},
		{Client{Model: "text-embedding-3-small", BaseURL: "https://API.openai.com/v1/", APIKey: "k", MaxBatch: 8},
			"openai-compatible:text-embedding-3-small" + openai},
		{Client{Model: "text-embedding-3-small", BaseURL: "https://u:pw@api.openai.com/v1?key=x"}, "openai-compatible:text-embedding-3-small" + openai},
		{Client{Model: "text-embedding-3-small", Dimensions: 256, BaseURL: "https://api.openai.com/v1"}, "openai-compatible:text-embedding-3-small:256" + openai},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.client.Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
	// Another endpoint serving a model of the same name is another vector space.
	a := Client{Model: "text-embedding-3-small", BaseURL: "https://api.openai.com/v1"}
	b := Client{Model: "text-embedding-3-small", BaseURL: "http://127.0.0.1:4000/v1"}
	if a.Name() == b.Name() {
		t.Errorf("two endpoints share the name %q", a.Name())
	}
}

func TestError(t *testing.T) {
	tests := []struct {
		name     string
		err      *Error
		wantText string
		wantIs   []error
		wantNot  []error
	}{
		{"plain", &Error{Code: CodeRejected, Message: "HTTP 401 Unauthorized", Status: 401},
			"embeddings: embeddings_rejected: HTTP 401 Unauthorized", []error{ErrEmbeddings}, []error{context.Canceled}},
		{"with a cause", &Error{Code: CodeUnavailable, Message: "context deadline exceeded", cause: fmt.Errorf("x: %w", context.DeadlineExceeded)},
			"embeddings: embeddings_unavailable: context deadline exceeded", []error{ErrEmbeddings, context.DeadlineExceeded}, []error{context.Canceled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = fmt.Errorf("indexer: %w", tt.err)
			if got, want := tt.err.Error(), tt.wantText; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if got := tt.err.Unwrap(); got != ErrEmbeddings {
				t.Errorf("Unwrap() = %v, want ErrEmbeddings", got)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = false, want true", target)
				}
			}
			for _, target := range tt.wantNot {
				if errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = true, want false", target)
				}
			}
		})
	}
}
