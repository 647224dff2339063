package registrysync

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// Two processes running the same server (their relist endpoints share a queue group): a
// served-elsewhere probe that neither of them sent — `servers remove` being refused, or anyone
// on NATS — had the answering one publish its status again whenever the last status named the
// other, so probes answered in turn wrote a status event each into the registry stream, which
// keeps its whole history. Only the process the status names, probing as it stops, leaves the
// status to the one that answers.
func TestProbesOfOthersDoNotRepublishStatus(t *testing.T) {
	t.Parallel()
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "pair", URL: url})
	cfg.HeartbeatEvery = 50 * time.Millisecond
	a := run(t, nil, cfg)
	rec := record(t, a.env, subjects.RegistryServer("pair"))
	rec.wait(0, "a ready", isStatus(subjects.StatusReady, ""))
	b := run(t, a.env, cfg)
	bReady := rec.wait(0, "b ready", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) && e.ev.Status.Connector == b.m.id
	})
	body, _ := json.Marshal(subjects.RelistRequest{V: subjects.Version, Kind: probeKind})
	for range 40 {
		if _, err := a.env.NC.Request(subjects.Relist("pair"), body, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The claims run after the answers: wait for what they publish (bounded).
	deadline := time.Now().Add(3 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		n = 0
		for _, e := range rec.all() {
			if e.seq > bReady.seq && e.ev.Status != nil {
				n++
			}
		}
		if n >= 5 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n >= 5 {
		t.Fatalf("%d status events published by 40 probes nobody running the server sent", n)
	}
}
