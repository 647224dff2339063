package registrysync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// serveRawChild is the child of childEnv=raw:<mode>: a hand-written 2025-11-25 stdio server
// that misbehaves in ways mcp-go's server cannot be made to:
//
//	stuck     stops reading stdin for good on its first tools/call (a hung single-threaded server)
//	flood     declares tools.listChanged and floods notifications/tools/list_changed
//	reqflood  floods ping requests at the client and never reads stdin again
//	reqfloodcase  the same, spelling the members "ID" and "Method" (encoding/json matches
//	          member names case-insensitively)
//	badtypes  answers tools/call with an "error" member of the wrong shape
//	huge      answers tools/call with a line longer than maxLineBytes (than $MCPSTREAM_TEST_HUGE_CAP
//	          bytes when set: see hugeCapEnv; so does taskhuge's tasks/result)
//	errhuge   answers tools/call with a JSON-RPC error whose message is 2 MiB
//	brokensecret answers tools/list with a line cut short that holds $SERVICE_TOKEN JSON-escaped
//	notifyfirst sends tools/list_changed just before its first tools/list result
//	hugenotify before each tools/list result, writes a notification and a request of its own
//	          with the list's id (each over what a line may be), then the result
//	hugelist  answers tools/list with a line over what a line may be, its id last
//	batch     answers tools/list and tools/call with JSON-RPC batches: a list_changed
//	          notification or a ping request, then the result
//	bigbatch  answers tools/list with a batch of more than maxBatch messages
//	nodiscover never answers server/discover (a legacy server that ignores a method it does not
//	          know, rather than answering -32601)
//	echoresult answers tools/call with the JSON of its argument "r" as the result
//	rawresult answers tools/call with the bytes its argument "b64" holds (base64) as the result,
//	          whatever they are (TestRawResultAcrossTransports)
//	taskbadget, taskbadresult, taskhuge  list "t" as requiring tasks and answer its tools/call
//	          with a task, then tasks/get (or tasks/result) with an "error" of the wrong shape,
//	          or tasks/result with a line longer than maxLineBytes
//	tasknanget, tasknanresult  the same, answering tasks/get (or tasks/result) with a line that
//	          is not valid JSON (a NaN in it, as Python's json.dumps writes)
//	broken    answers tools/call by its argument "r": "nan" with a NaN-bearing result (id first,
//	          as Python servers write it), "nansecret" the same with $SERVICE_TOKEN JSON-escaped
//	          in its text, "nanlast" the same with the id last, "cut" with a
//	          line cut short, "batch" with a refused batch (an object, then a number) holding
//	          the answer, "others" with broken lines that answer no waiting call (another id,
//	          the id as an extension of the call's, the id escaped, a request with the call's
//	          id, no id), then a valid answer "ok"; anything else "ok"

func serveRawChild(mode string) int {
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	write := func(s string) {
		mu.Lock()
		out.WriteString(s + "\n")
		out.Flush()
		mu.Unlock()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					R   json.RawMessage `json:"r"`
					B64 string          `json:"b64"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "" {
			continue
		}
		id := string(m.ID)
		switch m.Method {
		case "initialize":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"review","version":"1"}}}`)
		case "notifications/initialized":
			switch mode {
			case "flood":
				go func() {
					for {
						write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
					}
				}()
			case "reqflood", "reqfloodcase":
				format := `{"jsonrpc":"2.0","id":"srv-%d","method":"ping"}`
				if mode == "reqfloodcase" {
					format = `{"jsonrpc":"2.0","ID":"srv-%d","Method":"ping"}`
				}
				go func() {
					for i := 0; ; i++ {
						write(fmt.Sprintf(format, i))
					}
				}()
				select {} // never reads stdin again
			}
		case "ping":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
		case "tools/list":
			if strings.HasPrefix(mode, "task") {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}}`)
				continue
			}
			if mode == "brokensecret" {
				// A line cut short whose text holds the server's own token, escaped as
				// encoding/json escapes '&'.
				desc, _ := json.Marshal("key " + os.Getenv("SERVICE_TOKEN"))
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","description":` + string(desc))
				continue
			}
			switch mode {
			case "hugenotify":
				write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("n", 12<<20) + `"}}`)
				write(`{"jsonrpc":"2.0","id":` + id + `,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"` + strings.Repeat("r", 12<<20) + `"}}]}}`)
			case "hugelist":
				write(`{"result":{"tools":[{"name":"t","description":"` + strings.Repeat("d", 12<<20) + `"}]},"jsonrpc":"2.0","id":` + id + `}`)
				continue
			case "batch":
				write(`[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}]`)
				continue
			case "bigbatch":
				write(`[` + strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}},`, maxBatch) +
					`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}]`)
				continue
			}
			if mode == "notifyfirst" {
				mode = ""
				write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			}
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`)
		case "tasks/get":
			if mode == "tasknanget" {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"taskId":"t-1","status":"completed","pollInterval":NaN}}`)
				continue
			}
			if mode == "taskbadget" {
				write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":"oops","message":5}}`)
				continue
			}
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"taskId":"t-1","status":"completed"}}`)
		case "tasks/result":
			if mode == "taskhuge" {
				limit := maxLineBytes
				if n, err := strconv.Atoi(os.Getenv(hugeCapEnv)); err == nil {
					limit = n
				}
				write(`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", limit+1<<20) + `"}]},"jsonrpc":"2.0","id":` + id + `}`)
				continue
			}
			if mode == "tasknanresult" {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":{"v":NaN}}}`)
				continue
			}
			write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":"oops","message":5}}`)
		case "tools/call":
			switch mode {
			case "taskbadget", "taskbadresult", "taskhuge", "tasknanget", "tasknanresult":
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"task":{"taskId":"t-1","status":"working","pollInterval":100}}}`)
			case "stuck":
				select {}
			case "badtypes":
				write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":"oops","message":5}}`)
			case "batch":
				write(`[{"jsonrpc":"2.0","id":"srv-1","method":"ping"},{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"from a batch"}]}}]`)
			case "broken":
				nan := `{"content":[{"type":"text","text":"x"}],"structuredContent":{"v":NaN}}`
				switch string(m.Params.Arguments.R) {
				case `"nan"`:
					write(`{"jsonrpc":"2.0","id":` + id + `,"result":` + nan + `}`)
				case `"nansecret"`:
					desc, _ := json.Marshal("key " + os.Getenv("SERVICE_TOKEN"))
					write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":` + string(desc) + `}],"structuredContent":{"v":NaN}}}`)
				case `"nanlast"`:
					write(`{"result":` + nan + `,"jsonrpc":"2.0","id":` + id + `}`)
				case `"cut"`:
					write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"x`)
				case `"batch"`:
					write(`[{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"x"}]}},5]`)
				case `"others"`:
					plain := strings.Trim(id, `"`)
					write(`{"jsonrpc":"2.0","id":"mcpstream-999999","result":` + nan + `}`)
					write(`{"jsonrpc":"2.0","id":"` + plain + `0","result":` + nan + `}`)
					write(`{"jsonrpc":"2.0","id":"` + strings.Replace(plain, "m", `\u006d`, 1) + `","result":` + nan + `}`)
					write(`{"jsonrpc":"2.0","id":` + id + `,"method":"notifications/message","params":{"v":NaN}}`)
					write(`{"jsonrpc":"2.0","result":` + nan + `}`)
					write(`{"jsonrpc":"2.0","result":` + nan + `,"id":7}`)
					write(`[{"jsonrpc":"2.0","id":"mcpstream-999999","result":{}},5]`)
					write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"ok"}]}}`)
				default:
					write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"ok"}]}}`)
				}
			case "echoresult":
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":` + string(m.Params.Arguments.R) + `}`)
			case "rawresult":
				raw, _ := base64.StdEncoding.DecodeString(m.Params.Arguments.B64)
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":` + string(raw) + `}`)
			case "errhuge":
				write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32000,"message":"call ` + strings.Repeat("spam ", 400<<10) + `"}}`)
			case "huge":
				// Larger than a line may be, with the id last, as the TypeScript SDK writes it.
				limit := maxLineBytes
				if n, err := strconv.Atoi(os.Getenv(hugeCapEnv)); err == nil {
					limit = n
				}
				write(`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", limit+1<<20) + `"}]},"jsonrpc":"2.0","id":` + id + `}`)
			default:
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"ok"}]}}`)
			}
		default:
			if len(m.ID) > 0 && (mode != "nodiscover" || m.Method != "server/discover") {
				write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"no"}}`)
			}
		}
	}
	return 0
}

// hugeCapEnv tells the raw server of mode huge the cap on a line of the connector it answers
// (Manager.lineBytes, when a test lowers it): its answer is 1 MiB longer than that.
const hugeCapEnv = "MCPSTREAM_TEST_HUGE_CAP"

func rawServer(t *testing.T, name, mode string, env ...string) ServerConfig {
	return stdioServer(t, name, "raw:"+mode, env...)
}

// TestCallTimeoutOnStalledStdin: a tools/call frame that does not fit in the stdin pipe of a
// child that stopped reading used to block in Write, past the call's timeout, holding the
// writer (so every later request of the session too).
func TestCallTimeoutOnStalledStdin(t *testing.T) {
	h := run(t, nil, fastConfig(rawServer(t, "stuck", "stuck")))
	rec := record(t, h.env, subjects.RegistryServer("stuck"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	if r := h.m.Dispatch(context.Background(), "stuck", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 300}); r.Error == nil || r.Error.Code != subjects.CodeTimeout {
		t.Fatalf("first call: %+v, want timeout", r.Error)
	}
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", 256<<10) + `"}`)
	done := make(chan subjects.DispatchReply, 1)
	go func() {
		done <- h.m.Dispatch(context.Background(), "stuck", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: big, TimeoutMs: 300})
	}()
	select {
	case r := <-done:
		if r.Error == nil {
			t.Errorf("second call answered %s", r.Result)
		}
	case <-time.After(waitLimit): // a hang, not a slow answer: the call's own bound is 300 ms
		t.Fatal("a call with a 300ms timeout did not return (blocked writing the child's stdin)")
	}
}

// TestStalledStdinMakesServerUnavailable: a child that stopped reading its stdin stalled the
// liveness probe behind the blocked writer, so the hung server stayed ready for good.
func TestStalledStdinMakesServerUnavailable(t *testing.T) {
	cfg := fastConfig(rawServer(t, "stuck", "stuck"))
	cfg.PingEvery = 200 * time.Millisecond
	cfg.PingTimeout = 500 * time.Millisecond
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("stuck"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	go h.m.Dispatch(context.Background(), "stuck", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 60000})
	waitUntil(t, "the call in flight", func() bool { return h.m.Statuses()["stuck"].Status == subjects.StatusReady })
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", 256<<10) + `"}`)
	go h.m.Dispatch(context.Background(), "stuck", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: big, TimeoutMs: 300})
	rec.wait(ready.seq, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
}

// TestSSEStartBounded: an SSE server that accepts the connection and never answers the GET
// left the connector connecting for good (Start had no deadline) and Run could not stop.
func TestSSEStartBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	closeAll := func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { ln.Close(); closeAll() })
	cfg := fastConfig(ServerConfig{Name: "hung", Transport: TransportSSE, URL: "http://" + ln.Addr().String() + "/sse"})
	cfg.ConnectTimeout = 500 * time.Millisecond
	h := run(t, nil, cfg)
	waitUntil(t, "unavailable", func() bool { return h.m.Statuses()["hung"].Status == subjects.StatusUnavailable })
	h.cancel()
	select {
	case <-h.done:
		h.done <- nil
	case <-time.After(waitLimit):
		t.Errorf("Run did not return after its context ended")
		closeAll()
	}
}

// TestListChangedFloodNotAmplified: a server flooding list_changed stored one ListChanged event
// per notifier cycle (~500/s), although the kind stays stale until the next snapshot.
func TestListChangedFloodNotAmplified(t *testing.T) {
	h := run(t, nil, fastConfig(rawServer(t, "flood", "flood")))
	rec := record(t, h.env, subjects.RegistryServer("flood"))
	rec.wait(0, "first ListChanged", isChanged(subjects.KindTools))
	time.Sleep(2 * time.Second)
	n, snaps := 0, 0
	for _, e := range rec.all() {
		if e.ev.ListChanged != nil {
			n++
		}
		if e.ev.Snapshot != nil {
			snaps++
		}
	}
	if n > snaps+2 {
		t.Errorf("%d ListChanged events for %d snapshots from one flooding server: one per stale period expected", n, snaps)
	}
}

// TestServerRequestFloodBounded: a server flooding requests (ping) while not reading its stdin
// made mcp-go answer each on a goroutine of its own, all blocked on the stalled stdin.
func TestServerRequestFloodBounded(t *testing.T) {
	cfg := fastConfig(rawServer(t, "rf", "reqflood"))
	cfg.ListTimeout = 60 * time.Second
	run(t, nil, cfg)
	base := runtime.NumGoroutine()
	time.Sleep(2 * time.Second)
	if n := runtime.NumGoroutine(); n > base+500 {
		t.Errorf("%d goroutines (%d before) after 2s of a server flooding requests", n, base)
	}
}

// TestHTTPResponseBounded: an HTTP server answering tools/list with a 64 MiB body cost
// several times that in heap before the list was rejected as too large (no bound on bodies).
func TestHTTPResponseBounded(t *testing.T) {
	ts := httptest.NewServer(&hugeList{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{})), n: 64 << 20})
	t.Cleanup(ts.Close)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	h := run(t, nil, fastConfig(ServerConfig{Name: "huge", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	waitUntil(t, "a verdict", func() bool { return h.m.Statuses()["huge"].Status != subjects.StatusConnecting })
	close(stop)
	if grew := int64(peak.Load()) - int64(base); grew > 48<<20 {
		t.Errorf("the heap grew %d MiB for one hostile 64 MiB list (status %+v)", grew>>20, h.m.Statuses()["huge"])
	}
	// Said as for a stdio line or an event over the bound (the list was list_failed, the
	// bound's error lost in a probe's verdict).
	if st := h.m.Statuses()["huge"]; st.Code != subjects.CodeSnapshotTooLarge {
		t.Errorf("status %s %s %q, want %s", st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
	}
}

type hugeList struct {
	next http.Handler
	n    int
}

func (hl *hugeList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"},"description":"`)
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for i := 0; i < hl.n>>20; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}]}}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	hl.next.ServeHTTP(w, r)
}

// TestMalformedErrorAnswer: an answer to a call whose "error" has the wrong shape went to
// mcp-go, which dropped it: the call waited out its whole timeout and reported timeout.
func TestMalformedErrorAnswer(t *testing.T) {
	h := run(t, nil, fastConfig(rawServer(t, "bt", "badtypes")))
	rec := record(t, h.env, subjects.RegistryServer("bt"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := h.m.Dispatch(context.Background(), "bt", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError {
		t.Errorf("got %+v, want protocol_error", r.Error)
	}
}

// TestTaskMalformedAnswers: on stdio the task protocol's requests went through mcp-go, which
// drops an answer it cannot decode (an "error" of the wrong shape) and one over maxLineBytes:
// a task tool waited out its whole timeout and ended timeout, as tools/call did before it
// took the fast path.
func TestTaskMalformedAnswers(t *testing.T) {
	for _, tc := range []struct{ mode, code string }{
		{"taskbadget", subjects.CodeProtocolError},
		{"taskbadresult", subjects.CodeProtocolError},
		{"taskhuge", subjects.CodeResultTooLarge},
		{"tasknanget", subjects.CodeProtocolError},
		{"tasknanresult", subjects.CodeProtocolError},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			// (taskhuge: a line cap of a few MiB, as in TestStdioHugeResultAnswersAtOnce: a
			// 65 MiB line costs seconds under -race, past the call's timeout under load.)
			const lineCap = 4 << 20
			h := runWith(t, nil, fastConfig(rawServer(t, "tb", tc.mode, hugeCapEnv+"="+strconv.Itoa(lineCap))), func(m *Manager) { m.lineBytes = lineCap })
			rec := record(t, h.env, subjects.RegistryServer("tb"))
			rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
			r := h.m.Dispatch(context.Background(), "tb", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 25000})
			if r.Error == nil || r.Error.Code != tc.code {
				t.Errorf("got %+v, want %s", r.Error, tc.code)
			}
		})
	}
}

// TestRejectedRedacted: the names and messages of rejected definitions were published without
// redaction.
func TestRejectedRedacted(t *testing.T) {
	r := newRedactor(ServerConfig{Secrets: []string{"plain-secret-42"}})
	a := newAccumulator(subjects.KindTools, 1<<12)
	a.redact = r.JSON
	a.redactText = r.Text
	a.addPage(page{items: []json.RawMessage{
		json.RawMessage(`{"name":"leak-plain-secret-42","inputSchema":{"type":42}}`),
		json.RawMessage(`{"name":"dup-plain-secret-42","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"dup-plain-secret-42","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"p","inputSchema":{"type":"object","properties":{"plain-secret-42":7}}}`),
	}})
	data, _ := encodeJSON(a.l.Rejected)
	if bytes.Contains(data, []byte("plain-secret-42")) {
		t.Errorf("a configured secret reaches the published Rejected list: %s", data)
	}
	if len(a.l.Rejected) < 3 {
		t.Errorf("want the rejections kept (redacted): %s", data)
	}
}

func TestCappedReaders(t *testing.T) {
	read := func(r io.Reader) (int, error) {
		b, err := io.ReadAll(r)
		return len(b), err
	}
	if n, err := read(&cappedBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), left: 100}); err != nil || n != 100 {
		t.Errorf("body at the limit: %d %v", n, err)
	}
	if _, err := read(&cappedBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", 101))), left: 100}); !errors.Is(err, errResponseTooLarge) {
		t.Errorf("body over the limit: %v", err)
	}
	// The error names the bound (it named the size of the last read).
	if _, err := read(&cappedBody{ReadCloser: io.NopCloser(&chunked{s: strings.Repeat("x", 1000), n: 7}), left: 100}); err == nil || !strings.Contains(err.Error(), "over 100 bytes") {
		t.Errorf("body over the limit: %v, want it to say over 100 bytes", err)
	}
	// Events may add up to anything; one event may not pass the limit: it is discarded, and the
	// stream goes on (see TestSSEEventOverLimit).
	events := func(s string) io.Reader { return &sseRequests{src: io.NopCloser(strings.NewReader(s)), limit: 100} }
	stream := strings.Repeat("event: message\ndata: "+strings.Repeat("y", 50)+"\n\n", 100)
	if n, err := read(events(stream)); err != nil || n != len(stream) {
		t.Errorf("small events: %d %v", n, err)
	}
	crlf := strings.Repeat("data: "+strings.Repeat("y", 50)+"\r\n\r\n", 100)
	if n, err := read(events(crlf)); err != nil || n != len(crlf) {
		t.Errorf("small CRLF events: %d %v", n, err)
	}
	big := "data: " + strings.Repeat("z", 60) + "\ndata: " + strings.Repeat("z", 60) + "\n\n"
	if n, err := read(events(big + crlf)); err != nil || n != len(crlf) {
		t.Errorf("an event over the limit: %d %v, want it discarded and the rest passed", n, err)
	}
}

// TestJSONRPCErrorTextCapped: the message of a server's JSON-RPC error went whole (megabytes)
// into the dispatch reply, so into the call's result and audit events (and a failed
// list's into its log line); it is cut to maxServerErrorBytes.
func TestJSONRPCErrorTextCapped(t *testing.T) {
	h := run(t, nil, fastConfig(rawServer(t, "loud", "errhuge")))
	rec := record(t, h.env, subjects.RegistryServer("loud"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := h.m.Dispatch(context.Background(), "loud", subjects.DispatchRequest{V: 1, Tool: "t", TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, "JSON-RPC error -32000: call spam") {
		t.Fatalf("got %+v, want protocol_error with the server's code and the beginning of its message", r.Error)
	}
	if n := len(r.Error.Message); n > maxServerErrorBytes+100 {
		t.Errorf("the dispatch error holds %d bytes", n)
	}
}
