package demoservers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Control
		wantErr bool
	}{
		{in: `{}`, want: Control{}},
		{in: `{"hide":["a"],"add":["b","c"]}`, want: Control{Hide: []string{"a"}, Add: []string{"b", "c"}}},
		{in: " \n{\"add\": []}\n", want: Control{Add: []string{}}},
		{in: ``, wantErr: true},
		{in: `   `, wantErr: true},
		{in: `{not json`, wantErr: true},
		{in: `{"hdie":["a"]}`, wantErr: true},
		{in: `{"hide":"a"}`, wantErr: true},
		{in: `{"hide":[]} {"add":[]}`, wantErr: true},
		{in: `[]`, wantErr: true},
	} {
		got, err := ParseControl([]byte(tc.in))
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseControl(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (!slices.Equal(got.Hide, tc.want.Hide) || !slices.Equal(got.Add, tc.want.Add)) {
			t.Errorf("ParseControl(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// watchNotifications records the methods of the notifications c receives.
func watchNotifications(t *testing.T, c *client.Client) <-chan string {
	t.Helper()
	ch := make(chan string, 256)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case ch <- n.Method:
		default:
		}
	})
	return ch
}

// waitNotification waits for a notification with the given method.
func waitNotification(t *testing.T, ch <-chan string, method string) {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		select {
		case m := <-ch:
			if m == method {
				return
			}
		case <-deadline:
			t.Fatalf("no %s notification", method)
		}
	}
}

// waitTools waits, through list_changed notifications, until tools/list
// returns want.
func waitTools(t *testing.T, c *client.Client, ch <-chan string, want []string) {
	t.Helper()
	var got []string
	for range 20 { // at most 20 notifications: each change sends one
		waitNotification(t, ch, mcp.MethodNotificationToolsListChanged)
		if got = toolNamesOf(listTools(t, c)); slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("tools = %v, want %v", got, want)
}

// waitLog waits until the error log contains substr.
func waitLog(t *testing.T, log *syncBuffer, substr string) {
	t.Helper()
	for range 500 {
		if strings.Contains(log.String(), substr) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("error log %q lacks %q", log.String(), substr)
}

// modern reports whether connect negotiates 2026-07-28 on this transport:
// there notifications are opt-in through subscriptions/listen.
func modern(kind string) bool {
	return kind == "inprocess" || kind == "stdio" || kind == "http"
}

// subscribe opens a subscriptions/listen stream for tools/list_changed and
// waits for its acknowledgement, so no later change can be missed.
func subscribe(t *testing.T, c *client.Client, ch <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) {
		t.Errorf("subscriptions/listen: %v", err)
	})
	if err != nil {
		t.Fatalf("ListenAsync: %v", err)
	}
	t.Cleanup(stop)
	waitNotification(t, ch, mcp.MethodNotificationSubscriptionsAcknowledged)
}

func TestControlFile(t *testing.T) {
	defaults := []string{"closeIssue", "createIssue", "listIssues"}
	changed := []string{"assignIssue", "createIssue", "listIssues"}
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctl := filepath.Join(t.TempDir(), "control.json")
			errLog := &syncBuffer{}
			opts := testOptions(t)
			opts.ControlFile, opts.ErrorLog = ctl, errLog

			c := connect(t, kind, "ticketing", opts)
			ch := watchNotifications(t, c)
			if modern(kind) {
				subscribe(t, c, ch)
			}
			if got := toolNamesOf(listTools(t, c)); !slices.Equal(got, defaults) {
				t.Fatalf("tools without control file = %v, want %v", got, defaults)
			}

			writeFileAtomic(t, ctl, `{"add": ["assignIssue"], "hide": ["closeIssue"]}`)
			waitTools(t, c, ch, changed)
			callOK[gotIssue](t, c, "createIssue", map[string]any{"title": "t", "body": "", "priority": "low"})
			if got := callOK[gotIssue](t, c, "assignIssue", map[string]any{"id": "TCK-1", "assignee": "ana"}); got.Assignee != "ana" {
				t.Errorf("assignIssue = %+v", got)
			}
			if err := callErr(t, c, "closeIssue", map[string]any{"id": "TCK-1"}); err == nil {
				t.Errorf("hidden closeIssue still callable")
			}

			writeFileAtomic(t, ctl, `{"add": ["assignIssue"], "hide": [`)
			waitLog(t, errLog, "ignored, tools unchanged")
			if got := toolNamesOf(listTools(t, c)); !slices.Equal(got, changed) {
				t.Errorf("tools after malformed control file = %v, want unchanged %v", got, changed)
			}

			if err := os.Remove(ctl); err != nil {
				t.Fatal(err)
			}
			waitTools(t, c, ch, defaults)
		})
	}
}

func TestControlFileExtras(t *testing.T) {
	for _, tc := range []struct {
		server  string
		control string
		want    []string
		call    string
		args    map[string]any
	}{
		{"logging", `{"add":["tailLogs"],"hide":["getLogStats"]}`, []string{"getLogs", "tailLogs"},
			"tailLogs", map[string]any{"level": "error", "n": 3}},
		{"kb", `{"add":["summarize_document"]}`, []string{"get_document", "search_knowledge_base", "summarize_document"},
			"summarize_document", map[string]any{"id": "POL-TRAVEL", "maxSentences": 1}},
		{"ticketing", `{"hide":["createIssue","listIssues","closeIssue"]}`, []string{},
			"", nil},
	} {
		t.Run(tc.server, func(t *testing.T) {
			ctl := filepath.Join(t.TempDir(), "control.json")
			writeFileAtomic(t, ctl, tc.control)
			opts := testOptions(t)
			opts.ControlFile = ctl
			// The file is read once at construction: no notification needed.
			c := connect(t, "stdio-legacy", tc.server, opts)
			if got := toolNamesOf(listTools(t, c)); !slices.Equal(got, tc.want) {
				t.Fatalf("tools = %v, want %v", got, tc.want)
			}
			if tc.call != "" {
				res := callTool(t, c, tc.call, tc.args)
				if res.IsError || res.StructuredContent == nil {
					t.Errorf("%s: isError %v, structured %v: %s", tc.call, res.IsError, res.StructuredContent, resultText(res))
				}
			}
		})
	}
}

func TestControlFileUnknownTool(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "control.json")
	writeFileAtomic(t, ctl, `{"add":["dropDatabase"],"hide":["noSuchTool"]}`)
	errLog := &syncBuffer{}
	opts := testOptions(t)
	opts.ControlFile, opts.ErrorLog = ctl, errLog
	srv, err := New("ticketing", opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range srv.ListTools() {
		got = append(got, name)
	}
	slices.Sort(got)
	if want := []string{"closeIssue", "createIssue", "listIssues"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	if !strings.Contains(errLog.String(), `"dropDatabase" is not an optional tool`) {
		t.Errorf("error log %q does not name the unknown tool", errLog.String())
	}
}

// TestStdioModernNotificationsAreOptIn checks that a 2026-07-28 stdio client
// gets no tools/list_changed before it subscribes, and gets it after.
func TestStdioModernNotificationsAreOptIn(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "control.json")
	opts := testOptions(t)
	opts.ControlFile = ctl
	c := connect(t, "stdio", "ticketing", opts)
	ch := watchNotifications(t, c)

	writeFileAtomic(t, ctl, `{"add": ["assignIssue"]}`)
	want := []string{"assignIssue", "closeIssue", "createIssue", "listIssues"}
	for i := 0; !slices.Equal(toolNamesOf(listTools(t, c)), want); i++ {
		if i == 500 {
			t.Fatalf("control file not applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Notifications are written in order: one queued before the
	// subscription would arrive before its acknowledgement.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case m := <-ch:
		if m != mcp.MethodNotificationSubscriptionsAcknowledged {
			t.Fatalf("first notification = %s, want %s", m, mcp.MethodNotificationSubscriptionsAcknowledged)
		}
	case <-time.After(failSafe):
		t.Fatal("no subscription acknowledgement")
	}

	writeFileAtomic(t, ctl, `{}`)
	waitTools(t, c, ch, []string{"closeIssue", "createIssue", "listIssues"})
}
