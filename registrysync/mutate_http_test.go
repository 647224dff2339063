package registrysync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/demoservers"
)

// httpMutator sits between a connector and the ticketing demo server over streamable HTTP: it
// answers some requests itself without passing them on (an HTTP error, a connection closed),
// and mutates some answers the server gave (as the stdio mutator does its lines), while
// stopFile does not exist. It records what the stdio child records, in the same log.
type httpMutator struct {
	next     http.Handler
	stopFile string
	bodyCap  int // the connector's cap on a response body
	rate     float64

	mu       sync.Mutex
	rng      *rand.Rand
	logf     *os.File
	ids      []string
	injected int
}

func (p *httpMutator) record(kind string, v []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.logf.Write(append([]byte(kind+" "), append(bytes.ReplaceAll(v, []byte("\n"), nil), '\n')...))
}

// draw returns whether to mutate and which op of n, or -1.
func (p *httpMutator) draw(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := os.Stat(p.stopFile); err == nil || p.rng.Float64() >= p.rate {
		return -1
	}
	return p.rng.IntN(n)
}

func (p *httpMutator) intn(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

func (p *httpMutator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		p.next.ServeHTTP(w, r) // listening streams pass as they are
		return
	}
	body, err := readAllLimit(r.Body, 64<<20)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m clientFrame
	_ = json.Unmarshal(body, &m)
	if m.Method == "" && bytes.HasPrefix(m.ID, []byte(`"mut-`)) {
		w.WriteHeader(http.StatusAccepted) // the answer to a request the mutator made
		return
	}
	r.Body = readCloser{bytes.NewReader(body)}
	if m.Method == "subscriptions/listen" {
		p.next.ServeHTTP(w, r)
		return
	}
	// Refused before the server sees it.
	switch p.draw(12) {
	case 0:
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	case 1:
		w.Header().Set("Retry-After", strconv.Itoa(p.intn(2)))
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case 2:
		http.Error(w, "no such session", http.StatusNotFound)
		return
	case 3:
		http.Error(w, "oops", http.StatusInternalServerError)
		return
	case 4:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	if m.Method == "tools/call" && m.Params.Name == "createIssue" {
		p.record("call", []byte(m.Params.Arguments.Title))
	}
	rec := httptest.NewRecorder()
	p.next.ServeHTTP(rec, r)
	res := rec.Result()
	out := rec.Body.Bytes()
	// The one JSON-RPC message of the answer (a JSON body, or an SSE stream's last data).
	var msg []byte
	sse := strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
	if sse {
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				msg = append([]byte(nil), d...)
			}
		}
	} else {
		msg = bytes.TrimSpace(out)
	}
	var a struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(msg, &a) == nil && len(a.Result.Tools) > 0 && m.Method == "tools/list" {
		p.record("list", a.Result.Tools)
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	op := -1
	if res.StatusCode == http.StatusOK && len(msg) > 1 && msg[0] == '{' {
		op = p.draw(12)
	}
	if op >= 0 {
		p.record("mut", []byte("http op "+strconv.Itoa(op)+" on "+string(m.ID)+" "+m.Method))
	}
	isList := strings.HasSuffix(m.Method, "/list")
	asJSON := func(b []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Del("Content-Length")
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(b)
	}
	asSSE := func(msgs ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Del("Content-Length")
		w.WriteHeader(http.StatusOK)
		for _, s := range msgs {
			_, _ = w.Write([]byte("event: message\ndata: " + s + "\n\n"))
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
	switch op {
	case 0: // no answer: an empty body, or a connection closed after the headers
		if p.intn(2) == 0 {
			asJSON(nil)
			return
		}
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
	case 1: // the answer twice, in a stream
		asSSE(string(msg), string(msg))
	case 2: // a wrong id
		p.mu.Lock()
		ids := []string{`"mut-none"`, `999999`, `null`}
		if len(p.ids) > 0 {
			ids = append(ids, p.ids[p.rng.IntN(len(p.ids))])
		}
		id := ids[p.rng.IntN(len(ids))]
		p.mu.Unlock()
		asJSON(replaceID(msg, id))
	case 3: // broken JSON
		asJSON(msg[:p.intn(len(msg))])
	case 4: // written a few bytes at a time
		w.Header().Set("Content-Type", "application/json")
		w.Header().Del("Content-Length")
		w.WriteHeader(http.StatusOK)
		for b := msg; len(b) > 0; {
			n := min(1+p.intn(64), len(b))
			_, _ = w.Write(b[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			b = b[n:]
		}
	case 5: // unsolicited notifications and requests first, in a stream
		p.mu.Lock()
		p.injected++
		n := strconv.Itoa(p.injected)
		p.mu.Unlock()
		var msgs []string
		for range 1 + p.intn(20) {
			msgs = append(msgs, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		}
		msgs = append(msgs, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mut-`+n+`","progress":1}}`,
			`{"jsonrpc":"2.0","id":"mut-`+n+`a","method":"ping"}`,
			`{"jsonrpc":"2.0","id":"mut-`+n+`b","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`,
			string(msg))
		asSSE(msgs...)
	case 6: // padded to just under, at or just over the cap on a body
		n := p.bodyCap - 1 + p.intn(3)
		asJSON(slices.Concat([]byte(`{"pad":"`+strings.Repeat("p", max(n-len(msg)-len(`"pad":"",`), 0))+`",`), msg[1:]))
	case 7: // a null or empty result
		rs := []string{`null`, `[]`, `""`, `0`, `{}`, `{"content":null}`}
		if isList {
			rs = rs[:4]
		}
		asJSON([]byte(`{"jsonrpc":"2.0","id":` + string(a.ID) + `,"result":` + rs[p.intn(len(rs))] + `}`))
	case 8: // both a result and an error
		asJSON(slices.Concat(msg[:len(msg)-1], []byte(`,"error":{"code":-32603,"message":"both"}}`)))
	case 9: // bytes that are not UTF-8 (not in a list's definitions)
		i := bytes.Index(msg, []byte(`"text":"`))
		if isList || i < 0 {
			asJSON(append(append([]byte(nil), msg...), '\xff'))
			break
		}
		i += len(`"text":"`)
		asJSON(slices.Concat(msg[:i], []byte("\xff\xfe\xc3"), msg[i:]))
	case 10: // a stall
		time.Sleep(time.Duration(p.intn(300)) * time.Millisecond)
		asJSON(msg)
	case 11: // another status with the answer
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader([]int{http.StatusAccepted, http.StatusBadRequest, http.StatusInternalServerError}[p.intn(3)])
		_, _ = w.Write(msg)
	default:
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(out)
	}
	if len(a.ID) > 0 {
		p.mu.Lock()
		p.ids = append(p.ids, string(a.ID))
		p.mu.Unlock()
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func readAllLimit(r interface{ Read([]byte) (int, error) }, limit int) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(&limitedReader{r: r, n: limit})
	return b.Bytes(), err
}

type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, bytes.ErrTooLarge
	}
	p = p[:min(len(p), l.n)]
	n, err := l.r.Read(p)
	l.n -= n
	return n, err
}

// mutatedHTTPServer serves the ticketing demo server behind an httpMutator; it returns the
// server's URL.
func mutatedHTTPServer(t *testing.T, seed uint64, stopFile, logPath, control string, bodyCap int) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := demoservers.Handler(ctx, "ticketing", demoservers.Options{ControlFile: control, ControlInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	_, _ = logf.WriteString("start http\n")
	ts := httptest.NewServer(&httpMutator{next: h, stopFile: stopFile, bodyCap: bodyCap, rate: mutateRate(seed), rng: rand.New(rand.NewPCG(seed, 7)), logf: logf})
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}
