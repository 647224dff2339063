package registrysync

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natsembed"
)

// changedReadLogs counts the log lines saying the last list_changed could not be read, by level,
// and whether the line saying it is read again came.
func changedReadLogs(t *testing.T, logs *logBuffer) (byLevel map[string]int, readAgain bool) {
	t.Helper()
	byLevel = map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r logRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		switch {
		case strings.HasPrefix(r.Message, "cannot read the last list_changed"):
			byLevel[r.Level]++
		case strings.HasPrefix(r.Message, "the last list_changed is read again"):
			readAgain = true
		}
	}
	return byLevel, readAgain
}

// TestChangedReadFailureLoggedOncePerOutage: while NATS is away, every re-list of every kind
// fails to read the last list_changed. The failure is an error once per outage (the retries at
// debug level), and its end is said once NATS is back. It was an error at every retry of every
// kind: 9 lines per 20 s for three servers of three kinds.
func TestChangedReadFailureLoggedOncePerOutage(t *testing.T) {
	cfg := fastConfig(stdioServer(t, "fx", "fixture"))
	cfg.ResyncEvery = 50 * time.Millisecond // re-lists keep coming while NATS is away
	// Each read while NATS is away fails after the Manager's publishWait: 2 s here, not
	// publishTimeout (10 s), for the two the test waits for.
	h, logs := runLoggedWith(t, cfg, zerolog.DebugLevel, func(m *Manager) { m.publishWait = 2 * time.Second })
	waitUntil(t, "connector ready", h.m.Ready)

	listen := strings.TrimPrefix(h.env.URL, "nats://")
	h.env.Server.Shutdown()
	waitUntil(t, "the connection reconnecting", func() bool { return h.env.NC.Status() == nats.RECONNECTING })
	// Each failed read waits for its timeout (publishWait): the second comes a while later.
	deadline := time.Now().Add(3 * publishTimeout)
	for {
		n, _ := changedReadLogs(t, logs)
		if n["error"]+n["debug"] >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than two failed reads of the last list_changed logged while NATS is away: %v", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, _ := changedReadLogs(t, logs); n["error"] != 1 {
		t.Errorf("failed reads of the last list_changed logged as errors %d times in one outage, want once (by level: %v)", n["error"], n)
	}

	var srv *natsembed.Server
	var err error
	for range 50 { // the port may take a moment to be free again
		if srv, err = natsembed.Start(natsembed.Config{StoreDir: h.env.Dir, Listen: listen}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	h.env.Server = srv
	waitUntil(t, "the end of the outage logged", func() bool {
		_, again := changedReadLogs(t, logs)
		return again
	})
}
