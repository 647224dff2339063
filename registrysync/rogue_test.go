package registrysync

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// serveRogueChild is the child of childEnv=rogue:<mode>: a hand-written 2025-11-25 stdio server
// that fails the way real servers do:
//
//	crash       writes why on stderr and exits 7 at once (a server missing its configuration)
//	echoargs    writes its command line on stderr and exits 2 (a usage error)
//	longstderr  writes one 100 KiB stderr line that starts with what went wrong, then exits 3
//	silent      reads stdin to its end and never answers (nor writes on stderr): a process that
//	            is not an MCP stdio server, or one stuck before it serves
//	garbageinit answers initialize with JSON cut short
//	hugecursor  answers tools/list with one tool and a new 100 KiB nextCursor every page
//	tinyitems   answers tools/list with one page of a million empty objects
//	bigpage     answers tools/list with a 12 MB line (one tool with a huge description)
//	closestdout answers tools/list, then closes its stdout and keeps running, ignoring stdin
//	onebigtool  answers tools/list with a 1.5 MB tool (a huge description) and a small one
//	bigtools    answers tools/list with a new 1.5 MB tool and a new cursor every page
//	cursorreset lists its tools on two pages; while the first list is between them, its list
//	            changes: it notifies list_changed and refuses the old cursor (-32602), as a
//	            server whose cursors name a version of its list does
func serveRogueChild(mode string) int {
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "rogue: ROGUE_TOKEN is not set, cannot start")
		return 7
	case "echoargs":
		fmt.Fprintln(os.Stderr, "rogue: bad arguments: "+strings.Join(os.Args[1:], " "))
		return 2
	case "longstderr":
		fmt.Fprintln(os.Stderr, "rogue: fatal: config file /etc/rogue.toml is unreadable "+strings.Repeat("x", 100<<10)+" end")
		return 3
	case "silent":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	}
	out := bufio.NewWriter(os.Stdout)
	write := func(s string) {
		out.WriteString(s + "\n")
		out.Flush()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	pages := 0
	version, changed := 1, false // cursorreset
	for sc.Scan() {
		var params struct {
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.Unmarshal(sc.Bytes(), &params)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "" || len(m.ID) == 0 {
			continue
		}
		id := string(m.ID)
		switch m.Method {
		case "initialize":
			if mode == "garbageinit" {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capab`)
				continue
			}
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"rogue","version":"1"}}}`)
		case "ping":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
		case "tools/list":
			switch mode {
			case "hugecursor":
				pages++
				cursor := fmt.Sprintf("%d-%s", pages, strings.Repeat("c", 100<<10))
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}],"nextCursor":"` + cursor + `"}}`)
			case "bigpage":
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"big","description":"` + strings.Repeat("d", 12<<20) + `","inputSchema":{"type":"object"}}]}}`)
			case "onebigtool":
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"big","description":"` + strings.Repeat("d", 1500<<10) + `","inputSchema":{"type":"object"}},{"name":"t","inputSchema":{"type":"object"}}]}}`)
			case "bigtools":
				pages++
				write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"big%d","description":"%s","inputSchema":{"type":"object"}}],"nextCursor":"%d"}}`, id, pages, strings.Repeat("d", 1500<<10), pages))
			case "cursorreset":
				if params.Params.Cursor == "" {
					write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"a%d","inputSchema":{"type":"object"}}],"nextCursor":"v%d-p2"}}`, id, version, version))
					if !changed {
						changed, version = true, version+1
						write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
					}
					continue
				}
				if params.Params.Cursor != fmt.Sprintf("v%d-p2", version) {
					write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32602,"message":"Invalid cursor: the list changed"}}`)
					continue
				}
				write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"b%d","inputSchema":{"type":"object"}}]}}`, id, version))
			case "tinyitems":
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{}` + strings.Repeat(",{}", tinyItems-1) + `]}}`)
			default:
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`)
			}
			if mode == "closestdout" {
				_ = os.Stdout.Close()
				time.Sleep(time.Hour) // until stopped: SIGTERM ends it
				return 0
			}
		default:
			write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"no"}}`)
		}
	}
	return 0
}

// tinyItems is how many empty objects the tinyitems page holds: a 3 MB line.
const tinyItems = 1 << 20

func rogueServer(t *testing.T, name, mode string) ServerConfig {
	return stdioServer(t, name, "rogue:"+mode)
}

// TestCrashLoopStatusSaysWhy: a stdio server that exits at once (missing configuration) was
// published as unavailable with a reason that said nothing of the exit: the loss was reported
// from the broken pipe before the process's end was known, and so without its exit status and
// its last stderr line, which are what tells the operator what to fix.
func TestCrashLoopStatusSaysWhy(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rogueServer(t, "crash", "crash")))
	rec := record(t, h.env, subjects.RegistryServer("crash"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	for _, want := range []string{"exit status 7", "ROGUE_TOKEN is not set"} {
		if !strings.Contains(e.ev.Status.Reason, want) {
			t.Errorf("status reason %q does not say %q", e.ev.Status.Reason, want)
		}
	}
}

// TestLongStderrLineKeepsItsStart: of a stderr line longer than the reader's buffer, what was
// kept (and logged, and quoted in the status) was a piece of its end, overwritten by the
// skipping of the rest: the start, which says what went wrong, was lost.
func TestLongStderrLineKeepsItsStart(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rogueServer(t, "longerr", "longstderr")))
	rec := record(t, h.env, subjects.RegistryServer("longerr"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	if want := "rogue: fatal: config file /etc/rogue.toml is unreadable"; !strings.Contains(e.ev.Status.Reason, want) {
		t.Errorf("status reason %q does not keep the start of the stderr line %q", e.ev.Status.Reason, want)
	}
}

// TestGarbageInitializeAnswer: an answer to initialize that is not JSON was skipped (only the
// lists in flight were failed at once), and the handshake waited for ConnectTimeout.
func TestGarbageInitializeAnswer(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rogueServer(t, "garbage", "garbageinit"))
	cfg.ConnectTimeout = 10 * waitLimit // longer than the test waits: only a cancellation ends it
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("garbage"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	if e.ev.Status.Code != subjects.CodeMalformedResponse || !strings.Contains(e.ev.Status.Reason, "not JSON") {
		t.Errorf("status %s %q, want %s saying the answer is not JSON", e.ev.Status.Code, e.ev.Status.Reason, subjects.CodeMalformedResponse)
	}
}

// TestHugeCursorsBounded: every cursor a server handed out was kept whole to detect a repeated
// one, so a server of huge cursors held MaxPages of them (100 MB for 100 KiB cursors) before
// the list failed with too_many_pages. A cursor over 64 KiB is malformed.
func TestHugeCursorsBounded(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(rogueServer(t, "cursors", "hugecursor"))
	cfg.MaxPages = 20
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("cursors"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	if e.ev.Status.Code != subjects.CodeMalformedResponse || !strings.Contains(e.ev.Status.Reason, "nextCursor") {
		t.Errorf("status %s %q, want %s about the cursor", e.ev.Status.Code, e.ev.Status.Reason, subjects.CodeMalformedResponse)
	}
}

// TestTinyItemsListBounded: a 3 MB page of a million empty objects was decoded whole, by mcp-go
// into a million mcp.Tool values (about 2 KB each) and by the connector into a million items and
// rejections, before the snapshot's size limit refused it: gigabytes for a few MB of input.
// Items are counted before anything is decoded. Not parallel: it measures allocations.
func TestTinyItemsListBounded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before) // the embedded NATS and the Manager's start count too
	h := run(t, nil, fastConfig(rogueServer(t, "tiny", "tinyitems")))
	rec := record(t, h.env, subjects.RegistryServer("tiny"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	runtime.ReadMemStats(&after)
	if e.ev.Status.Code != subjects.CodeSnapshotTooLarge {
		t.Errorf("status %s %q, want %s", e.ev.Status.Code, e.ev.Status.Reason, subjects.CodeSnapshotTooLarge)
	}
	// The page is 3 MB; its copies along the way (reader, transport, capture) are a few times
	// that. A decode per item is hundreds of bytes to kilobytes each: over a million items.
	const bound = 256 << 20
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MB", got>>20)
	if got > bound {
		t.Errorf("listing a %d-item page of %d bytes allocated %d MB, more than %d MB", tinyItems, 3*tinyItems, got>>20, bound>>20)
	}
}

// TestStdioPageCapped: a stdio line was read whole up to maxLineBytes (64 MiB) whatever it
// answered, and copied several times (reader, transport, capture, decode) before the list was
// found too large. While no tools/call waits for an answer, a line is capped as an HTTP
// response is: at what an event may hold, plus room, and refused as soon as it passes that.
func TestStdioPageCapped(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rogueServer(t, "bigpage", "bigpage")))
	rec := record(t, h.env, subjects.RegistryServer("bigpage"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeSnapshotTooLarge || !strings.Contains(st.Reason, "line longer than") {
		t.Errorf("status %s %s %q, want unavailable %s: a line longer than allowed", st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
	}
}

// TestListChangedMidPagination: a server whose list changed while it was being listed page by
// page refuses the old cursor (-32602, as the spec says of an invalid cursor) after notifying
// list_changed. The failure was taken for the server's: the server was published unavailable
// (list_failed, a tools list that failed) and retried with backoff, although the re-list the
// notification scheduled was about to list it whole. A list overtaken by a list_changed is
// dropped whether it succeeded or failed (within the same bound of drops in a row).
func TestListChangedMidPagination(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(rogueServer(t, "midpage", "cursorreset")))
	rec := record(t, h.env, subjects.RegistryServer("midpage"))
	snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
	if got := names(t, snap.ev.Snapshot); !slices.Equal(got, []string{"a2", "b2"}) {
		t.Errorf("items = %v, want the changed list [a2 b2]", got)
	}
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	for _, e := range rec.all() {
		if e.ev.Status != nil && e.ev.Status.Status == subjects.StatusUnavailable {
			t.Errorf("a list overtaken by list_changed made the server unavailable: %s", e)
		}
	}
}

// TestOversizeToolLeftOutAlone: a tool over MaxDefinitionBytes is left out
// (definition_too_large) and the rest of the list is published; but with a NATS server of the
// default 1 MiB max_payload, a tool over what an event may hold (whose page still fits the
// page's cap, an event plus 1 MiB) failed the whole list snapshot_too_large: the bytes of the
// items left out counted against the snapshot, which does not hold them.
func TestOversizeToolLeftOutAlone(t *testing.T) {
	t.Parallel()
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	h := run(t, env, fastConfig(rogueServer(t, "onebig", "onebigtool")))
	rec := record(t, h.env, subjects.RegistryServer("onebig"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusReady {
		t.Fatalf("status %s %s %q, want ready: one oversize tool failed the whole list", st.Status, st.Code, st.Reason)
	}
	snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if got := names(t, snap); !slices.Equal(got, []string{"t"}) || len(snap.Rejected) != 1 ||
		snap.Rejected[0].Name != "big" || snap.Rejected[0].Code != subjects.CodeDefinitionTooLarge {
		t.Errorf("items = %v, rejected = %+v; want [t], big definition_too_large", got, snap.Rejected)
	}
}

// TestOversizeToolsReadBounded: items left out take no room in the snapshot, but a list still
// reads a bounded amount of them: endless pages of oversize tools end snapshot_too_large
// (not after MaxPages pages: gigabytes).
func TestOversizeToolsReadBounded(t *testing.T) {
	t.Parallel()
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	h := run(t, env, fastConfig(rogueServer(t, "bigtools", "bigtools")))
	rec := record(t, h.env, subjects.RegistryServer("bigtools"))
	e := rec.wait(0, "ready or unavailable", settled)
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || st.Code != subjects.CodeSnapshotTooLarge {
		t.Fatalf("status %s %s %q, want unavailable %s", st.Status, st.Code, st.Reason, subjects.CodeSnapshotTooLarge)
	}
}
