package registrysync

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// serveRogueChild is the child of childEnv=rogue:<mode>: a hand-written 2025-11-25 stdio server
// that fails the way real servers do:
//
//	crash       writes why on stderr and exits 7 at once (a server missing its configuration)
//	echoargs    writes its command line on stderr and exits 2 (a usage error)
//	longstderr  writes one 100 KiB stderr line that starts with what went wrong, then exits 3
//	garbageinit answers initialize with JSON cut short
//	hugecursor  answers tools/list with one tool and a new 100 KiB nextCursor every page
//	tinyitems   answers tools/list with one page of a million empty objects
//	bigpage     answers tools/list with a 12 MB line (one tool with a huge description)
//	closestdout answers tools/list, then closes its stdout and keeps running, ignoring stdin
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
	}
	out := bufio.NewWriter(os.Stdout)
	write := func(s string) {
		out.WriteString(s + "\n")
		out.Flush()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	pages := 0
	for sc.Scan() {
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
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"rogue","version":"1"}}}`)
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
