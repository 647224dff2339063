package registrysync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A seeded protocol mutator between a connector and the real ticketing demo server (the child
// of childEnv=mutate:<seed>): the child runs demoservers.ServeStdio in-process and passes its
// lines on to the connector, mutated at random while the file $MCPSTREAM_TEST_MUTATE_STOP does
// not exist, and records in $MCPSTREAM_TEST_MUTATE_LOG every createIssue call it hands to the
// server (its title) and every tools/list answer the server gave.
const (
	mutateStopEnv = "MCPSTREAM_TEST_MUTATE_STOP"
	mutateLogEnv  = "MCPSTREAM_TEST_MUTATE_LOG"
	mutateCapEnv  = "MCPSTREAM_TEST_MUTATE_CAP"
	mutateCtlEnv  = "MCPSTREAM_TEST_MUTATE_CONTROL"
	mutateRateEnv = "MCPSTREAM_TEST_MUTATE_RATE"
)

// mutateRate is the share of lines (answers) a seed mutates: 0.15 to 0.5.
func mutateRate(seed uint64) float64 { return 0.15 + 0.35*float64(seed%3)/2 }

// mutateLineCap is the connector's cap on a line in these tests (Manager.lineBytes): lines just
// over and under it cost little.
const mutateLineCap = 256 << 10

// mutator is the child's server→client side.
type mutator struct {
	mu       sync.Mutex
	out      *os.File
	rng      *rand.Rand
	held     []byte // a line held back, written after the next (reorder)
	heldGen  int
	lineCap  int
	stopFile string
	ids      []string // ids of answers written before (for wrong ids)
	injected int
	methods  *sync.Map // request id (raw JSON) → method
	note     func(kind string, v []byte)
	rate     float64 // of the lines mutated
}

func (x *mutator) stopped() bool {
	_, err := os.Stat(x.stopFile)
	return err == nil
}

// write writes b and a newline (x.mu held).
func (x *mutator) write(b []byte) {
	_, _ = x.out.Write(append(append([]byte(nil), b...), '\n'))
}

// flushHeld writes the line held back, if any (x.mu held).
func (x *mutator) flushHeld() {
	if x.held != nil {
		x.write(x.held)
		x.held = nil
	}
}

func (x *mutator) pad(n int) string { return strings.Repeat("p", max(n, 0)) }

var answerID = []byte(`"id":`)

// replaceID returns line with its top-level id value replaced (the first "id": member, which is
// where mcp-go writes it).
func replaceID(line []byte, id string) []byte {
	i := bytes.Index(line, answerID)
	if i < 0 {
		return line
	}
	j := i + len(answerID)
	k := j
	if k < len(line) && line[k] == '"' {
		k++
		for k < len(line) && line[k] != '"' {
			if line[k] == '\\' {
				k++
			}
			k++
		}
		k++
	} else {
		for k < len(line) && line[k] != ',' && line[k] != '}' {
			k++
		}
	}
	k = min(k, len(line))
	return slices.Concat(line[:j], []byte(id), line[k:])
}

// line handles one line of the server's.
func (x *mutator) line(l []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(l, &m)
	method := ""
	if len(m.ID) > 0 && m.Method == "" {
		if v, ok := x.methods.Load(string(m.ID)); ok {
			method = v.(string)
		}
	}
	isList := strings.HasSuffix(method, "/list")
	if x.stopped() || x.rng.Float64() >= x.rate {
		x.write(l)
		x.flushHeld()
		if len(m.ID) > 0 {
			x.ids = append(x.ids, string(m.ID))
		}
		return
	}
	op := x.rng.IntN(15)
	x.note("mut", fmt.Appendf(nil, "op %d on %s %s: %.200s", op, m.ID, method, l))
	switch op {
	case 0: // drop
	case 1: // duplicate
		x.write(l)
		x.write(l)
	case 2: // reorder: written after the next line, or after a moment
		x.flushHeld()
		x.held = append([]byte(nil), l...)
		x.heldGen++
		gen := x.heldGen
		time.AfterFunc(time.Duration(50+x.rng.IntN(200))*time.Millisecond, func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			if x.heldGen == gen {
				x.flushHeld()
			}
		})
		return
	case 3: // a wrong id: another answer's, a number as a string, one nobody asked for
		ids := []string{`"mut-none"`, `999999`, `null`, `{"x":1}`}
		if len(x.ids) > 0 {
			ids = append(ids, x.ids[x.rng.IntN(len(x.ids))])
		}
		if len(m.ID) > 0 && m.ID[0] != '"' {
			ids = append(ids, `"`+string(m.ID)+`"`)
		}
		x.write(replaceID(l, ids[x.rng.IntN(len(ids))]))
	case 4: // broken JSON: cut short, trailing data, a stray byte up front
		switch x.rng.IntN(3) {
		case 0:
			x.write(l[:x.rng.IntN(len(l))])
		case 1:
			x.write(append(append([]byte(nil), l...), []byte(`}{"x`)...))
		default:
			x.write(append([]byte("\x00"), l...))
		}
	case 5: // split into small writes
		b := append(append([]byte(nil), l...), '\n')
		for len(b) > 0 {
			n := min(1+x.rng.IntN(8), len(b))
			_, _ = x.out.Write(b[:n])
			b = b[n:]
			if x.rng.IntN(64) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	case 6: // unsolicited notifications first
		for range 1 + x.rng.IntN(40) {
			x.write([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
		}
		x.write([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mut-` + strconv.Itoa(x.rng.IntN(100)) + `","progress":1,"total":2}}`))
		x.write([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + strconv.Itoa(x.rng.IntN(100)) + `}}`))
		x.write([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"mutated"}}`))
		x.write(l)
	case 7: // requests of the server's own first
		x.injected++
		n := strconv.Itoa(x.injected)
		for _, r := range []string{
			`{"jsonrpc":"2.0","id":"mut-` + n + `a","method":"ping"}`,
			`{"jsonrpc":"2.0","id":"mut-` + n + `b","method":"roots/list"}`,
			`{"jsonrpc":"2.0","id":"mut-` + n + `c","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`,
			`{"jsonrpc":"2.0","id":"mut-` + n + `d","method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}`,
			`{"jsonrpc":"2.0","id":` + string(cmpOr(m.ID, []byte(`7`))) + `,"method":"ping"}`,
		} {
			if x.rng.IntN(2) == 0 {
				x.write([]byte(r))
			}
		}
		x.write(l)
	case 8: // a notification just under, at or just over the line cap, then the line
		n := x.lineCap - 1 + x.rng.IntN(3)
		head := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`
		tail := `"}}`
		x.write([]byte(head + x.pad(n-len(head)-len(tail)) + tail))
		x.write(l)
	case 9: // the answer itself padded to just under, at or just over the line cap
		if len(l) < 2 || l[0] != '{' {
			x.write(l)
			break
		}
		n := x.lineCap - 1 + x.rng.IntN(3)
		extra := `"pad":"",`
		x.write(slices.Concat([]byte(`{"pad":"`+x.pad(n-len(l)-len(extra))+`",`), l[1:]))
	case 10: // a null or empty result
		if len(m.ID) == 0 || m.Method != "" {
			x.write(l)
			break
		}
		// (Not {} or {"tools":null} for a list: a list result without its items is
		// malformed_response, the last list kept; see TestListWithoutItemsKeepsCatalog.)
		rs := []string{`null`, `[]`, `""`, `0`, `{}`, `{"content":null}`, `{"tools":null}`}
		if isList {
			rs = rs[:4]
		}
		r := rs[x.rng.IntN(len(rs))]
		x.write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + r + `}`))
	case 11: // both a result and an error
		if len(m.ID) == 0 || m.Method != "" || l[len(l)-1] != '}' {
			x.write(l)
			break
		}
		if x.rng.IntN(2) == 0 {
			x.write(slices.Concat(l[:len(l)-1], []byte(`,"error":{"code":-32603,"message":"both"}}`)))
		} else {
			x.write(slices.Concat([]byte(`{"error":{"code":-32603,"message":"both"},`), l[1:]))
		}
	case 12: // bytes that are not UTF-8, in a string (not in a list's definitions: the
		// catalog check below compares them with what the server sent)
		i := bytes.Index(l, []byte(`"text":"`))
		if isList || i < 0 {
			x.write(append(append([]byte(nil), l...), '\xff'))
			break
		}
		i += len(`"text":"`)
		x.write(slices.Concat(l[:i], []byte("\xff\xfe\xc3"), l[i:]))
	case 13: // a moment's stall
		time.Sleep(time.Duration(x.rng.IntN(300)) * time.Millisecond)
		x.write(l)
	default: // the answer twice, the second one broken
		x.write(l)
		x.write(l[:len(l)/2])
	}
	x.flushHeld()
}

func cmpOr(a, b []byte) []byte {
	if len(a) > 0 {
		return a
	}
	return b
}

// clientFrame is what the mutators read of a client's message: its id and method, and the
// tool and title of a tools/call (createIssue is counted by title).
type clientFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Title string `json:"title"`
		} `json:"arguments"`
	} `json:"params"`
}

// serveMutateChild is the child of childEnv=mutate:<seed>.
func serveMutateChild(arg string) int {
	seed, _ := strconv.ParseUint(arg, 10, 64)
	logPath := os.Getenv(mutateLogEnv)
	lineCap, _ := strconv.Atoi(os.Getenv(mutateCapEnv))
	logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var logMu sync.Mutex
	record := func(kind string, v []byte) {
		logMu.Lock()
		defer logMu.Unlock()
		_, _ = logf.Write(append([]byte(kind+" "), append(bytes.ReplaceAll(v, []byte("\n"), nil), '\n')...))
	}
	// Each child of a seed mutates differently: its start number counts in.
	data, _ := os.ReadFile(logPath)
	starts := uint64(bytes.Count(data, []byte("start ")))
	record("start", []byte(strconv.Itoa(os.Getpid())))

	var methods sync.Map
	x := &mutator{out: os.Stdout, rng: rand.New(rand.NewPCG(seed, starts)), lineCap: lineCap,
		stopFile: os.Getenv(mutateStopEnv), methods: &methods, note: record}
	x.rate, _ = strconv.ParseFloat(os.Getenv(mutateRateEnv), 64)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = demoservers.ServeStdio(ctx, "ticketing", demoservers.Options{ControlFile: os.Getenv(mutateCtlEnv), ControlInterval: 20 * time.Millisecond}, inR, outW)
		outW.Close()
	}()
	delay := rand.New(rand.NewPCG(seed, starts+1<<32))
	var delayMu sync.Mutex
	go func() { // client → server
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			l := sc.Bytes()
			var m clientFrame
			_ = json.Unmarshal(l, &m)
			if m.Method == "" && bytes.HasPrefix(m.ID, []byte(`"mut-`)) {
				continue // the answer to a request the mutator made
			}
			if len(m.ID) > 0 && m.Method != "" {
				methods.Store(string(m.ID), m.Method)
			}
			if m.Method == "tools/call" && m.Params.Name == "createIssue" {
				record("call", []byte(m.Params.Arguments.Title))
			}
			delayMu.Lock()
			if !x.stopped() && delay.IntN(8) == 0 {
				time.Sleep(time.Duration(delay.IntN(100)) * time.Millisecond)
			}
			delayMu.Unlock()
			if _, err := inW.Write(append(append([]byte(nil), l...), '\n')); err != nil {
				break
			}
		}
		inW.Close()
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		l := sc.Bytes()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Tools json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(l, &m) == nil && len(m.Result.Tools) > 0 {
			if v, ok := methods.Load(string(m.ID)); ok && v == "tools/list" {
				record("list", m.Result.Tools)
			}
		}
		x.line(append([]byte(nil), l...))
	}
	x.mu.Lock()
	x.flushHeld()
	x.mu.Unlock()
	return 0
}

// mutateLog is what a seed's children recorded.
type mutateLog struct {
	calls map[string]int // createIssue title → times handed to the server
	lists [][]any        // each distinct tools/list answer of the server, decoded
	last  []any          // the server's last tools/list answer
}

func readMutateLog(t *testing.T, path string) mutateLog {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ml := mutateLog{calls: map[string]int{}}
	for l := range strings.Lines(string(data)) {
		kind, v, _ := strings.Cut(strings.TrimSuffix(l, "\n"), " ")
		switch kind {
		case "call":
			ml.calls[v]++
		case "list":
			var items []any
			if err := json.Unmarshal([]byte(v), &items); err != nil {
				t.Fatalf("recorded list %q: %v", v, err)
			}
			ml.last = items
			if !slices.ContainsFunc(ml.lists, func(o []any) bool { return reflect.DeepEqual(o, items) }) {
				ml.lists = append(ml.lists, items)
			}
		}
	}
	return ml
}

// The codes a call may be answered with (README "Calling tools").
var documentedCodes = map[string]bool{
	subjects.CodeBadRequest: true, subjects.CodeTooLarge: true, subjects.CodeNotFound: true,
	subjects.CodeStale: true, subjects.CodeUnavailable: true, subjects.CodeForbidden: true,
	subjects.CodeUnknownPrincipal: true, subjects.CodeNeedsApproval: true, subjects.CodeDenied: true,
	subjects.CodeApprovalTimeout: true, subjects.CodeInvalidArguments: true, subjects.CodeRateLimited: true,
	subjects.CodeTimeout: true, subjects.CodeResultTooLarge: true, subjects.CodeOutcomeUnknown: true,
	subjects.CodeProtocolError: true, subjects.CodeInvalidSchema: true,
}

// runMutateSeed runs one seed: a Manager with the mutated ticketing server, an executor on it,
// calls through the NATS API while the mutator works, then recovery once it stops.
func runMutateSeed(t *testing.T, transport string, seed uint64, calls int) {
	env := natstest.Start(t)
	dir := t.TempDir()
	stopFile := filepath.Join(dir, "stop")
	logPath := filepath.Join(dir, "log")
	control := filepath.Join(dir, "control.json")
	setControl := func(c demoservers.Control) {
		data, _ := json.Marshal(c)
		if err := os.WriteFile(control+".tmp", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(control+".tmp", control); err != nil {
			t.Fatal(err)
		}
	}
	sc := stdioServer(t, "ticketing", "mutate:"+strconv.FormatUint(seed, 10),
		mutateStopEnv+"="+stopFile, mutateLogEnv+"="+logPath, mutateCapEnv+"="+strconv.Itoa(mutateLineCap), mutateCtlEnv+"="+control, mutateRateEnv+"="+strconv.FormatFloat(mutateRate(seed), 'g', -1, 64))
	if transport == TransportHTTP {
		sc = ServerConfig{Name: "ticketing", Transport: TransportHTTP,
			URL: mutatedHTTPServer(t, seed, stopFile, logPath, control, (&Manager{nc: env.NC}).payloadLimit()+responseRoom)}
	}
	sc.Kinds = []string{"tools"}
	if seed%2 == 1 {
		sc.ProtocolVersion = "2025-11-25"
	}
	rec := record(t, env, subjects.RegistryServer("ticketing"))
	baseline := len(ownGoroutines())

	cfg := fastConfig(sc)
	cfg.ListTimeout = 2 * time.Second
	cfg.ConnectTimeout = 2 * time.Second
	cfg.PingEvery = 300 * time.Millisecond
	cfg.PingTimeout = time.Second
	cfg.DrainTimeout = time.Second
	cfg.Debounce = 10 * time.Millisecond
	cfg.BackoffInitial = 20 * time.Millisecond
	cfg.BackoffMax = 200 * time.Millisecond
	m := New(env.JS, env.NC, cfg, testLogger(t))
	m.lineBytes = mutateLineCap
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- m.Run(mctx) }()
	ecfg := executor.Config{Dispatcher: m, Relister: m, Workers: 16, Log: testLogger(t).With().Str("role", "executor").Logger()}
	if seed%4 >= 2 { // through the connector's NATS endpoints, as another process would
		ecfg.Dispatcher, ecfg.Relister = nil, nil
	}
	ex, err := executor.New(env.NC, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(context.Background())
	edone := make(chan error, 1)
	go func() { edone <- ex.Run(ectx) }()
	began := time.Now()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ecancel()
		mcancel()
		for _, c := range []struct {
			what string
			done chan error
		}{{"executor", edone}, {"registrysync", mdone}} {
			select {
			case err := <-c.done:
				if err != nil {
					t.Errorf("%s Run: %v", c.what, err)
				}
			case <-time.After(waitLimit):
				t.Errorf("%s did not stop within %s", c.what, waitLimit)
			}
		}
	}
	t.Cleanup(stop)
	waitUntil(t, "executor ready", ex.Ready)

	client := executor.Client{NC: env.NC, JS: env.JS}
	type outcome struct {
		id, tool, title string
		res             subjects.CallResult
		err             error
		took            time.Duration
		timeout         time.Duration
	}
	var mu sync.Mutex
	var outs []outcome
	call := func(id, tool, args, title string, timeout time.Duration) outcome {
		ctx, cancel := context.WithTimeout(context.Background(), timeout+20*time.Second)
		defer cancel()
		start := time.Now()
		res, err := client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "ticketing__" + tool,
			Arguments: json.RawMessage(args), TimeoutMs: int64(timeout / time.Millisecond), Principal: subjects.Principal{User: "local"}})
		o := outcome{id: id, tool: tool, title: title, res: res, err: err, took: time.Since(start), timeout: timeout}
		mu.Lock()
		outs = append(outs, o)
		mu.Unlock()
		return o
	}
	rec.wait(0, "a tools snapshot", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return len(s.Items) > 0 }))
	rng := rand.New(rand.NewPCG(seed, 99))
	var wg sync.WaitGroup
	for i := range calls {
		id := fmt.Sprintf("s%d-c%d", seed, i)
		timeout := time.Duration(500+rng.IntN(1500)) * time.Millisecond
		if rng.IntN(3) == 0 {
			wg.Go(func() { call(id, "listIssues", `{"limit":1}`, "", timeout) })
		} else {
			title := "t-" + id
			wg.Go(func() {
				call(id, "createIssue", `{"title":"`+title+`","body":"b","priority":"low"}`, title, timeout)
			})
		}
		if rng.IntN(4) == 0 {
			wg.Wait()
		}
		if rng.IntN(6) == 0 { // the server's list changes too
			setControl([]demoservers.Control{{}, {Add: []string{"assignIssue"}}, {Hide: []string{"closeIssue"}},
				{Add: []string{"assignIssue"}, Hide: []string{"closeIssue"}}}[rng.IntN(4)])
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	}
	wg.Wait()
	phases := []time.Duration{time.Since(began)}

	// The mutator stops: a re-list and a call succeed.
	if err := os.WriteFile(stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep := m.Relist(ctx, "ticketing", subjects.RelistRequest{V: subjects.Version, Kind: subjects.KindTools, Why: "mutate"})
		cancel()
		if rep.Error == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: no re-list succeeded after the mutations stopped: %+v", seed, rep.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("s%d-final%d", seed, i)
		o := call(id, "createIssue", `{"title":"t-`+id+`","body":"b","priority":"low"}`, "t-"+id, 5*time.Second)
		if o.err == nil && o.res.Status == subjects.CallOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: no call succeeded after the mutations stopped: %+v %v", seed, o.res.Error, o.err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	phases = append(phases, time.Since(began))
	// The catalog ends with the server's current list.
	lastSnap := func() *subjects.Snapshot {
		var s *subjects.Snapshot
		for _, e := range rec.all() {
			if e.ev.Snapshot != nil {
				s = e.ev.Snapshot
			}
		}
		return s
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, want := snapshotItems(t, lastSnap()), readMutateLog(t, logPath).last
		if reflect.DeepEqual(got, want) {
			break
		}
		if time.Now().After(end) {
			t.Errorf("seed %d: the last snapshot (%d items) is not the server's last list (%d items)", seed, len(got), len(want))
			break
		}
	}
	// Every call: one documented answer in time, a side effect at most once (and none when
	// refused).
	ml := readMutateLog(t, logPath)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results, err := env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.err != nil {
			t.Errorf("seed %d call %s: %v", seed, o.id, o.err)
			continue
		}
		if o.took > o.timeout+15*time.Second {
			t.Errorf("seed %d call %s took %s, timeout %s", seed, o.id, o.took, o.timeout)
		}
		if o.res.Status != subjects.CallOK && (o.res.Error == nil || !documentedCodes[o.res.Error.Code]) {
			t.Errorf("seed %d call %s: %s %+v: not a documented code", seed, o.id, o.res.Status, o.res.Error)
		}
		info, err := results.Info(ctx, jetstream.WithSubjectFilter(subjects.Result("local", o.id)))
		if err != nil {
			t.Fatal(err)
		}
		if n := info.State.Subjects[subjects.Result("local", o.id)]; n != 1 {
			t.Errorf("seed %d call %s: %d answers stored, want 1", seed, o.id, n)
		}
		if o.title == "" {
			continue
		}
		n := ml.calls[o.title]
		switch {
		case n > 1:
			t.Errorf("seed %d call %s (createIssue) ran %d times; answered %s %+v", seed, o.id, n, o.res.Status, o.res.Error)
		case o.res.Status == subjects.CallRefused && n != 0:
			t.Errorf("seed %d call %s (createIssue) refused %+v, but it reached the server", seed, o.id, o.res.Error)
		case o.res.Status == subjects.CallOK && n != 1:
			t.Errorf("seed %d call %s (createIssue) ok, but it reached the server %d times", seed, o.id, n)
		case o.res.Status == subjects.CallOK && !bytes.Contains(o.res.Result, []byte(`"title":"`+o.title+`"`)):
			t.Errorf("seed %d call %s (createIssue) ok with another call's answer: %.300s", seed, o.id, o.res.Result)
		}
	}
	// The catalog holds only lists the server sent.
	if len(ml.lists) == 0 {
		t.Fatalf("seed %d: the server never answered tools/list", seed)
	}
	for _, e := range rec.all() {
		if e.ev.Snapshot == nil {
			continue
		}
		items := snapshotItems(t, e.ev.Snapshot)
		if !slices.ContainsFunc(ml.lists, func(l []any) bool { return reflect.DeepEqual(l, items) }) {
			t.Errorf("seed %d: snapshot %s is no list the server sent: %d items, rejected %+v", seed, e, len(items), e.ev.Snapshot.Rejected)
		}
	}

	if t.Failed() {
		for l := range strings.Lines(string(must(os.ReadFile(logPath)))) {
			if strings.HasPrefix(l, "mut ") || strings.HasPrefix(l, "start ") {
				t.Logf("mutator: %s", strings.TrimSpace(l))
			}
		}
	}
	// Nothing left behind once stopped.
	phases = append(phases, time.Since(began))
	stop()
	phases = append(phases, time.Since(began))
	deadline = time.Now().Add(waitLimit)
	for len(ownGoroutines()) > baseline {
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: %d goroutines after stop, %d before start:\n%s", seed, len(ownGoroutines()), baseline, strings.Join(ownGoroutines(), "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	var refused, failed, ok int
	codes := map[string]int{}
	for _, o := range outs {
		if o.res.Error != nil {
			codes[o.res.Error.Code]++
		}
		switch o.res.Status {
		case subjects.CallOK:
			ok++
		case subjects.CallRefused:
			refused++
		default:
			failed++
		}
	}
	t.Logf("seed %d: %d calls: %d ok, %d refused, %d failed %v; %d children; %s", seed, len(outs), ok, refused, failed, codes, bytes.Count(must(os.ReadFile(logPath)), []byte("start ")), phases)
}

// snapshotItems decodes a snapshot's items.
func snapshotItems(t *testing.T, s *subjects.Snapshot) []any {
	t.Helper()
	if s == nil {
		return nil
	}
	items := make([]any, 0, len(s.Items))
	for _, it := range s.Items {
		var v any
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatalf("snapshot item %s: %v", it, err)
		}
		items = append(items, v)
	}
	return items
}

// ownGoroutines are the stacks of the goroutines running this module's code or mcp-go's, but
// the test's own (the NATS server's and the test framework's are not counted).
func ownGoroutines() []string {
	buf := make([]byte, 8<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if (strings.Contains(g, "mcpstream/mcpstream/") || strings.Contains(g, "mark3labs/mcp-go")) &&
			!strings.Contains(g, "runMutateSeed") && !strings.Contains(g, "validatorPool") && !strings.Contains(g, "nats-server/v2/server") {
			out = append(out, g)
		}
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestMutatedTicketing runs a few seeds of the mutators, over stdio and streamable HTTP (more
// with MCPSTREAM_TEST_MUTATE_SEEDS=N from MCPSTREAM_TEST_MUTATE_FIRST, and
// MCPSTREAM_TEST_MUTATE_CALLS calls each). Each seed drives calls of the non-idempotent
// createIssue and the read-only listIssues through an executor (in-process dispatch, or over
// NATS for seeds 2 and 3 mod 4; legacy protocol for odd seeds) while the server's answers are
// mutated and its list changes now and then, and checks: every call has one answer, in time,
// with a documented code; createIssue reached the server at most once, never when refused, once
// when answered ok and with its own answer; every snapshot is a list the server sent; once the
// mutations stop a re-list and a call succeed and the catalog ends with the server's list; no
// goroutine of the connector or the executor outlives them. A panic fails the test binary.
func TestMutatedTicketing(t *testing.T) {
	seeds, first, calls := 2, uint64(1), 20
	if n, err := strconv.Atoi(os.Getenv("MCPSTREAM_TEST_MUTATE_CALLS")); err == nil {
		calls = n
	}
	if n, err := strconv.Atoi(os.Getenv("MCPSTREAM_TEST_MUTATE_SEEDS")); err == nil {
		seeds = n
	}
	if n, err := strconv.ParseUint(os.Getenv("MCPSTREAM_TEST_MUTATE_FIRST"), 10, 64); err == nil {
		first = n
	}
	for seed := first; seed < first+uint64(seeds); seed++ {
		for _, tr := range []string{TransportStdio, TransportHTTP} {
			t.Run(tr+"/"+strconv.FormatUint(seed, 10), func(t *testing.T) { runMutateSeed(t, tr, seed, calls) })
		}
	}
}
