package registrysync

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// heartbeats runs while the Manager runs: it sends a Heartbeat every cfg.HeartbeatEvery (from a
// goroutine of its own), and reclaims the servers a watchdog declared lost (connector_lost)
// while this process still runs them — it was cut off from NATS, or too slow — by publishing
// their current status again. A declaration is seen live on the status subjects, or, when it
// was made while this process was cut off, on the stream after the reconnection.
func (m *Manager) heartbeats(ctx context.Context) {
	every := m.cfg.HeartbeatEvery
	if every <= 0 || m.nc == nil {
		return
	}
	lost := make(chan string, 256)
	var recheck atomic.Bool // a burst overflowed lost: read the stream for every server
	sub, err := m.nc.Subscribe(subjects.RegistryAllStatus, func(msg *nats.Msg) {
		ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
		if err != nil || ev.Status == nil || ev.Status.Code != subjects.CodeConnectorLost || !m.Serves(ev.Status.Server) {
			return
		}
		select {
		case lost <- ev.Status.Server:
		default: // a burst: the next tick reads the stream for every server
			recheck.Store(true)
		}
	})
	if err != nil {
		m.log.Warn().Err(err).Msg("cannot watch for connector_lost declarations")
	} else {
		defer sub.Unsubscribe()
	}
	// The heartbeats have a goroutine of their own: a reclaim waits on JetStream (up to
	// publishTimeout per publish, behind the connector's own status publish), and heartbeats
	// that waited with it would get the process declared lost while it runs its servers.
	var beating sync.WaitGroup
	defer beating.Wait()
	beating.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			m.beat(every)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	reconnects := m.nc.Stats().Reconnects
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-lost:
			m.reclaim(ctx, name)
		case <-tick.C:
			again := recheck.Swap(false)
			if r := m.nc.Stats().Reconnects; r != reconnects || again {
				reconnects = r
				m.reclaimDeclared(ctx)
			}
		}
	}
}

// beat sends one heartbeat (core NATS: a lost one is made up for by the next).
func (m *Manager) beat(every time.Duration) {
	data, _ := json.Marshal(subjects.Heartbeat{V: subjects.Version, Type: subjects.EventHeartbeat,
		Connector: m.id, EveryMs: every.Milliseconds(), At: time.Now().UTC()})
	if err := m.nc.Publish(subjects.HeartbeatSubject(m.id), data); err != nil {
		m.log.Debug().Err(err).Msg("heartbeat not sent")
	}
}

// reclaimDeclared reclaims every server of this process whose last status on the stream is a
// connector_lost declaration.
func (m *Manager) reclaimDeclared(ctx context.Context) {
	for _, name := range m.Servers() {
		if ctx.Err() != nil {
			return
		}
		last, err := m.lastMsg(ctx, subjects.RegistryStatus(name))
		if err != nil || last == nil {
			continue
		}
		ev, err := subjects.DecodeRegistryMsg(last.Subject, last.Data)
		if err == nil && ev.Status != nil && ev.Status.Code == subjects.CodeConnectorLost {
			m.reclaim(ctx, name)
		}
	}
}

// reclaim publishes again the current status of a server this process runs.
func (m *Manager) reclaim(ctx context.Context, name string) {
	c := m.connector(name)
	if c == nil {
		return
	}
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if m.connector(name) != c {
		return // removed meanwhile: its last status says so
	}
	c.mu.Lock()
	if c.status.Status == "" {
		c.mu.Unlock()
		return // nothing published yet: the first status will be
	}
	c.status.At = time.Now().UTC()
	c.mu.Unlock()
	m.log.Info().Str("server", name).Msg("declared lost while running: status published again")
	c.publishCurrentLocked(ctx)
}
