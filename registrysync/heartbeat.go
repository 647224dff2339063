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

// heartbeats runs while the Manager runs, and while it stops until its servers are retired
// (Manager.retire, which waits for the claims of the servers another process answers for): it
// sends a Heartbeat every cfg.HeartbeatEvery (from a goroutine of its own), and reclaims the servers that the registry says nobody runs while this
// process still runs them, by publishing their current status again (see disowned): a
// watchdog declared them lost (connector_lost) because this process was cut off from NATS, or
// too slow; or, while it was cut off, another process stopping found nobody else answering for
// them (connector_stopped), or `servers remove` retracted them (removed: their lists are
// published again too). Such a status is seen live on the status subjects, or, when it was
// stored while this process was cut off, or dropped by the NATS client (a burst of statuses
// past the subscription's pending limits), on the stream after the reconnection or the drop.
// At every period it also checks that the registry stream still holds what the connectors
// stored (checkStream).
func (m *Manager) heartbeats(ctx context.Context) {
	every := m.cfg.HeartbeatEvery
	if every <= 0 || m.nc == nil {
		return
	}
	lost := make(chan string, 256)
	var recheck atomic.Bool // a burst overflowed lost: read the stream for every server
	sub, err := m.nc.Subscribe(subjects.RegistryAllStatus, func(msg *nats.Msg) {
		ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
		if err != nil || ev.Status == nil || !m.disowned(ev.Status) || !m.Serves(ev.Status.Server) {
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
	var restores sync.WaitGroup // (see checkStream)
	defer restores.Wait()
	reconnects := m.nc.Stats().Reconnects
	var dropped int // statuses the NATS client dropped from sub (a slow consumer)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-lost:
			if m.reclaim(ctx, name) {
				// The stream did not hold the status seen live yet (it is stored a moment
				// after subscribers get it), or a newer one: the next tick reads it again.
				recheck.Store(true)
			}
		case <-tick.C:
			again := recheck.Swap(false)
			if sub != nil {
				// Past its pending limits (a burst of statuses while the handler waits), the
				// NATS client drops what comes, a declaration too: the stream has it.
				if d, err := sub.Dropped(); err == nil && d != dropped {
					m.log.Warn().Int("dropped", d-dropped).Str("subject", sub.Subject).
						Msg("statuses dropped by the NATS client (slow consumer): reading the last status of every server")
					dropped, again = d, true
				}
			}
			if r := m.nc.Stats().Reconnects; r != reconnects || again {
				reconnects = r
				m.reclaimDeclared(ctx)
			}
			if m.checking.CompareAndSwap(false, true) {
				// (on a goroutine of its own: with NATS away the read waits up to
				// publishTimeout, which would hold up declarations and reclaims)
				restores.Go(func() {
					defer m.checking.Store(false)
					m.checkStream(ctx, &restores)
				})
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

// disowned reports whether st says that nobody runs its server, which this process would
// contradict if it runs it: a connector_lost declaration (whoever it names: this process is not
// silent), or the connector_stopped or removed status of another process (this process's own
// are published only once it no longer runs the server). A stopping process (its endpoints
// gone, its calls draining) reclaims only the declarations: a removal or another process's
// stop found nobody answering for the server, rightly; and, once it retires its servers
// (Manager.retire, its heartbeats still going), nothing (see reclaim).
func (m *Manager) disowned(st *subjects.Status) bool {
	if st.Code == subjects.CodeConnectorLost {
		return true
	}
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	return running && st.Connector != m.id && (st.Status == subjects.StatusRemoved || st.Code == subjects.CodeConnectorStopped)
}

// reclaimDeclared reclaims every server of this process whose last status on the stream is
// disowned.
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
		if err == nil && ev.Status != nil && m.disowned(ev.Status) {
			m.reclaim(ctx, name)
		}
	}
}

// reclaim publishes again the current status of a server this process runs, and its lists when
// the last status on the stream says it was removed (the removal retracted them). It reports
// true when the stream's last status is not one to reclaim: a newer one, or the one seen live
// not stored yet.
func (m *Manager) reclaim(ctx context.Context, name string) (notYet bool) {
	c := m.connector(name)
	if c == nil || m.retiring.Load() {
		// (Retiring: the last word on each server is retire's, connector_stopped, or that of
		// the process that answered its probe, which reclaims a declaration itself: this
		// one's status, published now, would name a process about to stop beating.)
		return false
	}
	removed := false
	if last, err := m.lastMsg(ctx, subjects.RegistryStatus(name)); err == nil && last != nil {
		ev, err := subjects.DecodeRegistryMsg(last.Subject, last.Data)
		if err == nil && ev.Status != nil && !m.disowned(ev.Status) {
			return true // a newer status, the one seen not stored yet (or this process is stopping: see disowned)
		}
		removed = err == nil && ev.Status != nil && ev.Status.Status == subjects.StatusRemoved
	}
	if !m.republishStatus(ctx, c, "declared not served while running: status published again") || !removed {
		return false
	}
	m.log.Warn().Str("server", name).Msg("removed (servers remove) while this process ran it, cut off from NATS: published again; drop it from this process's configuration to retire it")
	// The removal stored an empty snapshot of every kind the server had: the connector forgets
	// the snapshots it knew, so that its next lists are published (pubMu: not while a list is
	// being published).
	c.pubMu.Lock()
	c.mu.Lock()
	for k, st := range c.kstate {
		st.known = false
		c.kstate[k] = st
	}
	c.mu.Unlock()
	c.pubMu.Unlock()
	c.requestRelist(nil)
	return false
}

// claim publishes again the current status of a server this process runs when its last status
// names the process from which came the probe this process answered (servedElsewhere), and
// that process sends heartbeats: it is stopping, and leaves the status to this one; left naming
// it, the status would have watchdogs declare the server lost (connector_lost) once its
// heartbeats end, while this process runs it. A probe of anyone else (`servers remove` being
// refused, a client on NATS) claims nothing: two processes running the server would otherwise
// publish a status event each for the probes answered in turn, into a stream that keeps them.
//
// Any NATS client may send probes, naming whom it likes: the claims of one server run one at a
// time, on the goroutine of the probe that found none running, each round reading the last
// status once for every probe that came meanwhile (at most maxClaimFroms distinct senders a
// round) and publishing it at most once; a round after one that published waits until
// HeartbeatEvery has passed since (two processes running the server, probed in turn by a
// client naming the other, would otherwise write a status each per probe). A burst of probes
// thus costs one goroutine, one stream read per round and at most one status per HeartbeatEvery
// per server, and the probe that came from a stopping process is claimed about a heartbeat
// period late at most; the stopping process beats until the claim lands (Manager.awaitClaims),
// so that watchdogs declare nothing in between (subjects.MissedHeartbeats), however late.
func (m *Manager) claim(server, from string) {
	c := m.connector(server)
	if c == nil || m.nc == nil || from == "" || len(from) > maxClaimFrom {
		return
	}
	c.claimMu.Lock()
	if c.claimFroms == nil {
		c.claimFroms = map[string]struct{}{}
	}
	if len(c.claimFroms) < maxClaimFroms {
		c.claimFroms[from] = struct{}{}
	}
	if c.claiming {
		c.claimMu.Unlock()
		return // the running claim's next round takes it
	}
	c.claiming = true
	c.claimMu.Unlock()
	idle := false
	defer func() {
		if !idle { // stopping, or a panic (Manager.handle recovers): the next probe claims
			c.claimMu.Lock()
			c.claiming = false
			c.claimMu.Unlock()
		}
	}()
	for {
		c.claimMu.Lock()
		froms, wait := c.claimFroms, time.Until(c.claimedAt.Add(m.cfg.HeartbeatEvery))
		c.claimFroms = nil
		if len(froms) == 0 {
			// Under claimMu: a probe that comes next finds no claim running, and runs its own.
			c.claiming, idle = false, true
			c.claimMu.Unlock()
			return
		}
		c.claimMu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
		}
		if m.claimRound(c, server, froms) {
			c.claimMu.Lock()
			c.claimedAt = time.Now()
			c.claimMu.Unlock()
		}
	}
}

// maxClaimFroms bounds the distinct probe senders one claim round checks the last status
// against (more are not claimed for: a sender that matters is the one process the status
// names), and maxClaimFrom the length of one (connector ids are short).
const (
	maxClaimFroms = 64
	maxClaimFrom  = 512
)

// claimRound reads the server's last status once and publishes c's current status again when
// it names one of froms (see claim); it reports whether it did.
func (m *Manager) claimRound(c *connector, server string, froms map[string]struct{}) bool {
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	if !running || m.connector(server) != c {
		return false
	}
	if hook := m.beforeClaim.Load(); hook != nil {
		(*hook)(server)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.publishWait)
	defer cancel()
	last, err := m.lastMsg(ctx, subjects.RegistryStatus(server))
	if err != nil || last == nil {
		return false
	}
	ev, err := subjects.DecodeRegistryMsg(last.Subject, last.Data)
	if err != nil || ev.Status == nil || ev.Status.Connector == m.id || ev.Status.HeartbeatMs <= 0 {
		return false // this process's own, or one no watchdog watches (removed: see disowned)
	}
	if _, ok := froms[ev.Status.Connector]; !ok {
		return false // not the prober's
	}
	return m.republishStatus(ctx, c, "another process that ran this server leaves it to this one: status published again")
}

// republishStatus publishes c's current status again, unless Remove took c or nothing was
// published yet (why is logged); it reports whether it did.
func (m *Manager) republishStatus(ctx context.Context, c *connector, why string) bool {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if m.connector(c.sc.Name) != c {
		return false // removed meanwhile: its last status says so
	}
	c.mu.Lock()
	if c.status.Status == "" {
		c.mu.Unlock()
		return false // nothing published yet: the first status will be
	}
	c.status.At = time.Now().UTC()
	c.mu.Unlock()
	m.log.Info().Str("server", c.sc.Name).Msg(why)
	c.publishCurrentLocked(ctx)
	return true
}
