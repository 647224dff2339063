package demoservers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// countingSession is an initialized MCP session that only collects the
// notifications the server sends it.
type countingSession struct{ ch chan mcp.JSONRPCNotification }

func (s *countingSession) Initialize()                                         {}
func (s *countingSession) Initialized() bool                                   { return true }
func (s *countingSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.ch }
func (s *countingSession) SessionID() string                                   { return "counting" }

// drain returns how many tools/list_changed notifications arrived since the
// last call.
func (s *countingSession) drain() int {
	n := 0
	for {
		select {
		case m := <-s.ch:
			if m.Method == mcp.MethodNotificationToolsListChanged {
				n++
			}
		default:
			return n
		}
	}
}

// TestControlFileEditSteps drives the control file through what a user and
// an editor do to it, polling synchronously: every real change sends exactly
// one tools/list_changed, and every broken state keeps the last good tools,
// sends none and says why in the log.
func TestControlFileEditSteps(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "ticketing.control.json")
	errLog := &syncBuffer{}
	opts := testOptions(t)
	opts.ControlFile, opts.ErrorLog = ctl, errLog
	d, err := build("ticketing", opts)
	if err != nil {
		t.Fatal(err)
	}
	sess := &countingSession{ch: make(chan mcp.JSONRPCNotification, 64)}
	if err := d.srv.RegisterSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	defaults := []string{"closeIssue", "createIssue", "listIssues"}
	changed := []string{"assignIssue", "closeIssue", "createIssue"}
	tools := func() []string {
		var names []string
		for name := range d.srv.ListTools() {
			names = append(names, name)
		}
		slices.Sort(names)
		return names
	}
	write := func(data string) { // in place, as an editor does: truncate, then write
		if err := os.WriteFile(ctl, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good := `{"hide":["listIssues"],"add":["assignIssue"]}`

	for _, step := range []struct {
		what    string
		do      func()
		want    []string
		notify  int
		logWant string
	}{
		{"no file", func() {}, defaults, 0, ""},
		{"hide and add (README example)", func() { write(good) }, changed, 1, "control file applied"},
		{"same content again", func() { write(good) }, changed, 0, ""},
		{"same tools, reformatted", func() { write("{\n  \"add\": [\"assignIssue\"],\n  \"hide\": [\"listIssues\"]\n}\n") }, changed, 0, ""},
		{"truncated by the editor", func() { write("") }, changed, 0, "empty control file (ignored, tools unchanged)"},
		{"half written", func() { write(`{"hide":["listIss`) }, changed, 0, "unexpected EOF (ignored, tools unchanged)"},
		{"not JSON", func() { write("hide: listIssues") }, changed, 0, "not a JSON object (ignored, tools unchanged)"},
		{"wrong type", func() { write(`{"hide":"listIssues"}`) }, changed, 0, "cannot unmarshal string"},
		{"wrong element type", func() { write(`{"add":[1]}`) }, changed, 0, "cannot unmarshal number"},
		{"huge", func() { write(`{"hide":[` + strings.Repeat(" ", maxControlFile) + `]}`) }, changed, 0, "larger than 1048576 bytes (ignored, tools unchanged)"},
		{"good again", func() { write(good) }, changed, 0, ""},
		{"typo in hide", func() { write(`{"hide":["listIssue"],"add":["assignIssue"]}`) }, []string{"assignIssue", "closeIssue", "createIssue", "listIssues"}, 1, `"listIssue" is not a tool of ticketing`},
		{"typo in add", func() { write(`{"hide":["listIssues"],"add":["asignIssue"]}`) }, []string{"closeIssue", "createIssue"}, 1, `"asignIssue" is not an optional tool of ticketing`},
		{"deleted", func() {
			if err := os.Remove(ctl); err != nil {
				t.Fatal(err)
			}
		}, defaults, 1, "not found: default tools"},
	} {
		before := len(errLog.String())
		step.do()
		d.pollControl()
		logged := errLog.String()[before:]
		if got := tools(); !slices.Equal(got, step.want) {
			t.Errorf("%s: tools = %v, want %v", step.what, got, step.want)
		}
		if got := sess.drain(); got != step.notify {
			t.Errorf("%s: %d tools/list_changed, want %d", step.what, got, step.notify)
		}
		if step.logWant != "" && !strings.Contains(logged, step.logWant) {
			t.Errorf("%s: log %q lacks %q", step.what, logged, step.logWant)
		}
		if step.logWant == "" && logged != "" {
			t.Errorf("%s: unexpected log %q", step.what, logged)
		}
	}
}
