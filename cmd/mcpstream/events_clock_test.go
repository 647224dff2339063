package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestEventsSinceOnHostClockOff: `events --since 10m` asked JetStream for the messages stored
// after its own host's now less 10 minutes, and JetStream compares that with its own
// timestamps: on a host an hour ahead it printed nothing of what was stored a moment ago (an
// hour behind, the last 70 minutes). An age counts back from the NATS server's clock.
func TestEventsSinceOnHostClockOff(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hostClock = func() time.Time { return time.Now().Add(time.Hour) }
	out, _, err := runCmd(t, ctx, "events", "--json", "--since", "10m", "--nats", env.URL)
	hostClock = time.Now
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 13 {
		t.Errorf("events --since 10m on a host an hour ahead: %d events, want the 13 stored a moment ago", n)
	}
	// An RFC3339 time is the server's time as given.
	out, _, err = runCmd(t, ctx, "events", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--nats", env.URL)
	if err != nil || out != "" {
		t.Errorf("events --since an hour from now = %q, %v; want nothing", out, err)
	}
}
