// Package liveness notices a registrysync process that stopped without saying so — killed,
// its host gone, cut off from NATS — and declares its servers unavailable, so that search stops
// offering their tools.
//
// A registrysync process draws a connector id at start, names it in every status it publishes
// (subjects.Status.Connector) with the period of its heartbeats (HeartbeatMs), and sends a
// subjects.Heartbeat on subjects.HeartbeatSubject(id) (core NATS, not stored) that often. A
// stopping one publishes connector_stopped itself (package registrysync).
//
// # Consumes
//
// Heartbeats (subjects.HeartbeatAll, a plain subscription read by the checking goroutine; only
// those of connectors that some server's last status names are kept; a subscription NATS
// refused — this process's user may not subscribe there — hears none, and the watchdog then
// declares nothing, with an error in its log, until a reconnection, after which it subscribes
// anew: NATS says so only in the connection's last error, which another error of a shared
// connection can replace — a subscription made again with the others on a reconnection, or
// with another refused meanwhile, is made anew, up to 3 times, until its answer is told), and the
// last status of every server and then each new one (subjects.RegistryAllStatus on the
// registry stream, an ordered consumer delivering the last message per subject first). A lost
// consumer is made again by the watchdog, with a backoff that watches Run's context: while the
// stream is missing (deleted, NATS restarted without its store) Run still returns once its
// context ends. A stream made again is noticed within 5 s (its creation time, read every 5 s:
// the ordered consumer would go on from the sequence after the last it read, skipping as many
// statuses of the new stream, whose sequences start over from 1), and the consumer made anew;
// the statuses read from the old stream are dropped.
//
// # Produces
//
// For a server whose last status names a connector with HeartbeatMs, once that connector has
// been silent for subjects.MissedHeartbeats periods (counted from when this watchdog started,
// last reconnected, resumed from a pause — a check over a second late: the heartbeats of the
// pause may still wait unread in its connection — or first saw the status, if later: the same
// status read again by a consumer made anew is no news of its connector) and a round
// trip to the NATS server (within 2 s) shows that the silence is not this watchdog's own (its
// connection stalled by a partition that TCP and NATS have not noticed yet: silence then counts
// from that failed round trip; after one that succeeds, the heartbeats that came before the
// server's answer count, and the silence is measured up to that round trip, however late the
// check goes on after it): a Status unavailable, code connector_lost, naming the silent
// connector, published with Nats-Expected-Last-Subject-Sequence set to the status it saw, and
// only if the registry stream is still the one that status was read from (its creation time,
// read before each batch of declarations: on a stream made again the sequence could be a newer
// status's; the consumer is then made anew at once).
// Several watchdogs (one per indexer replica) may race: the first declaration is stored, the
// others are refused by the stream, and none lands over a newer status. Statuses without
// HeartbeatMs (removed, connector_stopped, or from a process that sends none) are not watched,
// nor kept. A server whose declaration is refused because its status is gone from the stream
// (purged, or deleted) is forgotten.
//
// Pauses are told by the ticks: the time a check itself waits (the round trip, up to 2 s; the
// acknowledgements of declarations, up to 5 s; the look-ups of refused ones, up to 5 s) is not
// counted as one.
//
// The consumer of statuses is made again when it fails, after a delay that grows while it
// cannot be made (250 ms to 10 s) and starts over from 250 ms once it worked.
//
// # Recovery
//
// A registrysync process that is still running (it was only cut off, or slow) sees the
// declaration — live, or on the stream after reconnecting — and publishes its current status
// again (registrysync's heartbeats loop).
package liveness
