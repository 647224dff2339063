package registrysync

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// checkStream reads the registry stream's info (one request, whatever the number of servers)
// and has every connector whose events the stream no longer holds publish them again (restore):
// the stream was purged (`nats stream purge`, whole: its first sequence is past what the
// connector stored), or deleted and created again (its creation time changed). Catalog replicas
// rebuild from what the stream holds, and executors started since know only that: without the
// connectors' current lists and statuses they know none of their tools, and registrysync
// publishes a list again only when it changes. restores runs the restores, each on a goroutine
// of its own (one waits for the connector's list in flight). A failed read (NATS away, the
// stream deleted and not created again yet) is tried again at the next call.
func (m *Manager) checkStream(ctx context.Context, restores *sync.WaitGroup) {
	m.mu.Lock()
	running := m.running
	conns := make([]*connector, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	m.streamMu.Lock()
	st, created := m.stream, m.streamCreated
	m.streamMu.Unlock()
	if !running || st == nil {
		return // (not read yet: the connectors read what it holds when they start)
	}
	// What the connectors stored is read before the stream's info: one stored while the
	// request travels lies past the info's last sequence, and would be taken for purged.
	stored := make([][]uint64, len(conns))
	for i, c := range conns {
		stored[i] = c.stored()
	}
	ictx, cancel := context.WithTimeout(ctx, m.publishWait)
	info, err := st.Info(ictx)
	cancel()
	if err != nil {
		return
	}
	why := ""
	if !info.Created.Equal(created) {
		m.streamMu.Lock()
		m.streamCreated = info.Created
		m.streamMu.Unlock()
		why = "the registry stream was created again"
	}
	for i, c := range conns {
		reason := why
		if reason == "" && !heldBy(stored[i], info.State) {
			reason = "the registry stream no longer holds the server's events (purged)"
		}
		if reason == "" || !c.restoring.CompareAndSwap(false, true) {
			continue
		}
		restores.Go(func() {
			defer c.restoring.Store(false)
			c.restore(ctx, reason)
		})
	}
}

// stored returns the sequences of what the connector knows it stored or found on the registry
// stream: its last status and the snapshot of every kind it knows (0s left out).
func (c *connector) stored() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var seqs []uint64
	if c.statusSeq > 0 {
		seqs = append(seqs, c.statusSeq)
	}
	for _, st := range c.kstate {
		if st.known && st.seq > 0 {
			seqs = append(seqs, st.seq)
		}
	}
	return seqs
}

// heldBy reports whether a stream in state still holds seqs (see stored), read before state
// was. The registry stream keeps them for good (only confirmations expire), so one before its
// first sequence, or past its last, was purged (or belongs to a stream since deleted).
func heldBy(seqs []uint64, state jetstream.StreamState) bool {
	for _, seq := range seqs {
		if seq < state.FirstSeq || seq > state.LastSeq {
			return false
		}
	}
	return true
}

// restore forgets what the connector knew of the registry stream (its snapshots, ListChanged
// events and confirmations: none is there any more) and publishes again its current status
// and, at its next re-list (at once when connected, else once it connects), every list, as at
// start.
func (c *connector) restore(ctx context.Context, why string) {
	c.pubMu.Lock() // not while a list is being published
	c.mu.Lock()
	for k := range c.kstate {
		c.kstate[k] = kindState{}
	}
	c.statusSeq = 0
	c.mu.Unlock()
	c.pubMu.Unlock()
	c.m.mu.Lock()
	running := c.m.running
	c.m.mu.Unlock()
	if !running || ctx.Err() != nil {
		return // stopping: its last status is published by retire
	}
	c.log.Warn().Str("why", why).Msg("publishing the server's status and lists again")
	c.m.republishStatus(ctx, c, why+": status published again")
	c.requestRelist(nil)
}
