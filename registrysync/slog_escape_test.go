package registrysync

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestMCPGoLogEscaped: mcp-go's log lines carry a server's text (the body of an HTTP error
// answering the listening GET, say), and the bridge made them the message of a zerolog event,
// which the text log format (the default) writes as it is: a body with a line end and escape
// sequences forged log lines and rewrote the operator's terminal. Fields are quoted by the
// writer; the message is escaped here.
func TestMCPGoLogEscaped(t *testing.T) {
	var out bytes.Buffer
	log := zerolog.New(zerolog.ConsoleWriter{Out: &out, NoColor: true})
	body := "bad gateway\n12:00:00.000 INF connected serverName=trusted\x1b[2K\r\u202eevil"
	newSlog(log, newRedactor(ServerConfig{})).Error("failed to listen to server. retry in 1 second",
		"err", fmt.Errorf("request failed with status 502: %s", body))
	got := out.String()
	if strings.Count(got, "\n") != 1 || strings.ContainsAny(got, "\x1b\r\u202e") {
		t.Errorf("logged %q: the server's line end, escape or bidi override went out as they are", got)
	}
	if !strings.Contains(got, `bad gateway\x0a12:00:00.000`) {
		t.Errorf("logged %q, want the server's text escaped, not dropped", got)
	}
}
