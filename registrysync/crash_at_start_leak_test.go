package registrysync

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// zombieChildren counts this process's children that have exited but were never reaped.
func zombieChildren(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("no /proc: %v", err)
	}
	me := os.Getpid()
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, the last ')' ends it.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[0] == "Z" && f[1] == strconv.Itoa(me) {
			n++
		}
	}
	return n
}

// A stdio server that fails right after it starts (before the handshake), reconnected again and
// again by the backoff: every attempt's process is reaped, its pipes closed, its goroutines gone.
func TestCrashAtStartReconnectsLeakNothing(t *testing.T) {
	for name, script := range map[string]string{
		"exit":        `exit 1`,
		"garbage":     `echo not-json; echo oops >&2; exit 3`,
		"stdout-shut": `exec >&-; sleep 0.2`,
		"grandchild":  `sleep 60 & exit 1`,
	} {
		t.Run(name, func(t *testing.T) {
			starts := filepath.Join(t.TempDir(), "starts")
			sc := ServerConfig{Name: "crashy", Transport: TransportStdio, Command: "/bin/sh",
				Args: []string{"-c", `echo x >> "$STARTS"; ` + script}, Env: map[string]string{"STARTS": starts}}
			cfg := fastConfig(sc)
			cfg.BackoffInitial, cfg.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
			count := func() int {
				b, _ := os.ReadFile(starts)
				return bytes.Count(b, []byte("\n"))
			}
			run(t, nil, cfg)
			waitUntil(t, "3 starts", func() bool { return count() >= 3 })
			base := measure(t)
			from := count()
			const cycles = 20
			waitUntil(t, fmt.Sprintf("%d more starts", cycles), func() bool { return count() >= from+cycles })
			deadline := time.Now().Add(waitLimit)
			var now resources
			var z int
			for {
				now, z = measure(t), zombieChildren(t)
				if now.goroutines <= base.goroutines+churnSlack && now.fds <= base.fds+churnSlack && z <= 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after %d failed starts: %s and %d unreaped children, before: %s", count()-from, now, z, base)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
