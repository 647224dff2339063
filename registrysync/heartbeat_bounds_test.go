package registrysync

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestHeartbeatEveryBounded: a configured heartbeat period is kept within the bounds a
// watchdog honours, so that the period a status announces (heartbeatMs) is the one the process
// beats at: under a millisecond it announced none (nobody watched a process beating thousands
// of times a second), past an hour a watchdog, waiting three hours at most, declared lost a
// process beating every four.
func TestHeartbeatEveryBounded(t *testing.T) {
	for _, tc := range []struct {
		every  time.Duration
		wantMs int64
	}{
		{0, DefaultHeartbeatEvery.Milliseconds()},
		{-1, 0},
		{500 * time.Microsecond, subjects.MinHeartbeat.Milliseconds()},
		{time.Millisecond, subjects.MinHeartbeat.Milliseconds()},
		{100 * time.Millisecond, 100},
		{4 * time.Hour, subjects.MaxHeartbeat.Milliseconds()},
		{1<<63 - 1, subjects.MaxHeartbeat.Milliseconds()},
	} {
		m := &Manager{cfg: Config{HeartbeatEvery: tc.every}.withDefaults()}
		c := &connector{m: m}
		if got := c.newStatus(subjects.StatusReady, "", "").HeartbeatMs; got != tc.wantMs {
			t.Errorf("HeartbeatEvery %v: status heartbeatMs %d, want %d", tc.every, got, tc.wantMs)
		}
		if every := m.cfg.HeartbeatEvery; every > 0 && every.Milliseconds() != tc.wantMs {
			t.Errorf("HeartbeatEvery %v: beats every %v, announced %d ms", tc.every, every, tc.wantMs)
		}
	}
}
