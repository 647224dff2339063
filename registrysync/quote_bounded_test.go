package registrysync

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

const quoteSecret = "s3cr3tV4lue"

// hostileText is about 4 MiB of a server's text with escapes and cut marks in it (as a hostile
// server may send), the secret at its start and end.
func hostileText(start string) string {
	unit := `a%5Cu0041 b\u0042 c%41 d\\/ e… `
	return start + quoteSecret + " " + strings.Repeat(unit, (4<<20)/len(unit)) + quoteSecret
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestServerTextsQuotedBounded: each place that quotes a server's text of megabytes (a stdout
// line that is not JSON-RPC, a broken JSON line, a status reason, a log line of mcp-go's)
// redacts its start only, with memory bounded by the bytes it keeps, not by the text's; the
// secret is replaced all the same.
func TestServerTextsQuotedBounded(t *testing.T) {
	red := newRedactor(ServerConfig{Secrets: []string{quoteSecret}})
	for _, tc := range []struct {
		name, start string
		quote       func(text string, logs *bytes.Buffer) string
	}{
		{"stdout text", "banner ", func(text string, logs *bytes.Buffer) string {
			c := &child{red: red, log: zerolog.New(logs)}
			c.handle([]byte(text))
			return logs.String()
		}},
		{"broken JSON line", `{"jsonrpc":"2.0","x":"`, func(text string, _ *bytes.Buffer) string {
			var sample string
			c := &child{red: red, log: zerolog.Nop(), onMalformed: func(s string, _ bool) { sample = s }}
			c.handle([]byte(text))
			return sample
		}},
		{"status reason", "connect failed: ", func(text string, _ *bytes.Buffer) string {
			c := &connector{red: red, m: &Manager{cfg: Config{}.withDefaults()}}
			return c.newStatus(subjects.StatusUnavailable, subjects.CodeUnavailable, text).Reason
		}},
		{"mcp-go log", "failed to read: ", func(text string, logs *bytes.Buffer) string {
			newSlog(zerolog.New(logs), red).Error(text)
			return logs.String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := hostileText(tc.start)
			var logs bytes.Buffer
			var got string
			alloc := allocated(func() { got = tc.quote(text, &logs) })
			// (a broken JSON line that may spell it with escapes is not quoted at all)
			if strings.Contains(got, quoteSecret) || !strings.Contains(got, "[redacted]") && !strings.Contains(got, "(not quoted") {
				t.Errorf("quoted %.200q…", got)
			}
			if len(got) > 4<<10 {
				t.Errorf("quoted %d bytes", len(got))
			}
			if alloc > 16<<20 {
				t.Errorf("quoting a %d-byte text allocated %d MB", len(text), alloc>>20)
			}
		})
	}
}

// TestStderrByteDumpCut: a stderr line too long for the reader holding a Go byte dump of a
// request with the secret in it (as %v prints a []byte) is kept cut to its start; the dump cut
// short there is replaced as a whole one is, the secret's bytes in decimal not logged.
func TestStderrByteDumpCut(t *testing.T) {
	red := newRedactor(ServerConfig{Headers: map[string]string{"Authorization": "Bearer " + quoteSecret}})
	body := `{"headers":{"Authorization":"Bearer ` + quoteSecret + `"},"pad":"` + strings.Repeat("x", 40<<10) + `"}`
	var dump strings.Builder
	for i := 0; i < len(body); i++ {
		if i > 0 {
			dump.WriteByte(' ')
		}
		fmt.Fprint(&dump, body[i])
	}
	line := "request: [" + dump.String() + "]\n"
	secretDump := strings.Trim(fmt.Sprint([]byte(quoteSecret)), "[]")

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{stderr: r, stderrDone: make(chan struct{})}
	go c.drainStderr(red, zerolog.Nop())
	if _, err := w.WriteString(line); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-c.stderrDone:
	case <-ctx.Done():
		t.Fatal("stderr not drained")
	}
	r.Close()
	if got := c.stderrLast; strings.Contains(got, secretDump) || !strings.HasPrefix(got, "request: [redacted]") {
		t.Errorf("stderr line kept as %.200q", got)
	}
}
