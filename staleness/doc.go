// Package staleness is the freshness state machine shared by the indexer and the executor.
//
// A View consumes registry events (subjects.RegistryEvent: snapshots, list_changed,
// confirmations, status, revocations) in stream order and answers, for any (server, tool), one State:
//
//	fresh        listed, not past its ttlMs, server ready
//	expired      listed, but ttlMs has run out: revalidate by re-listing before use (not refused)
//	stale        the server announced list_changed and has not been re-listed yet
//	unavailable  the server is connecting, disconnected or unreachable (with the reason)
//	removed      a later snapshot no longer holds the tool, or the server was removed (a kind
//	             remembers MaxRemembered removed tool names beyond its list (New; another
//	             bound with NewRemembering), MaxRememberedItems prompt or resource names, then
//	             forgets them:
//	             unknown; Remembers says which names a kind still knows). A removal drops the
//	             server's lists, as the catalog does: a server added again under its name
//	             lists nothing until its next snapshot, and the items of its old lists stay
//	             removed meanwhile (not fresh, stale or unavailable again with its next status;
//	             the dropped list still counts as its list for the bound, so the empty
//	             snapshot that retracts it, or a repeated removal, forgets none of its names)
//	revoked      an operator revoked it
//	unknown      never listed
//
// Precedence, strongest first: revoked, removed, unknown, unavailable, stale, expired, fresh
// (except that every item of a kind the server never listed — a list_changed of it lists nothing —
// is unavailable, not unknown, while the server is not ready: it may list it once it is). A
// list_changed makes the whole list of that kind stale at once, whatever its TTL said; a new
// snapshot makes it fresh again, and so does a subjects.Confirmed event that answers it: it
// names the fingerprint held and an afterSeq at least the stream sequence of the list_changed
// (RegistryEvent.Seq, which the consumer sets; see Answers). Any other confirmation restarts
// the TTL of a list but does not lift a list_changed: its re-list may predate the change, and a
// list_changed applied without its sequence is lifted by a snapshot only. A confirmation is
// either local (Confirm, from the
// answer to a re-list this process asked for) or a subjects.Confirmed event on the stream
// (registrysync publishes one when a re-list of a list with a ttlMs finds it unchanged, so
// that every consumer's TTL restarts, and a replay restores it); both apply only to the list
// of the fingerprint they name, and never move its listedAt back. The ttlMs runs from listedAt,
// a time on the clock of registrysync's host, read on this process's clock. A host behind
// shortens it (the executor confirms the re-lists it asks for at when it asked, on its own
// clock, so a registrysync host behind by more than a TTL does not leave the list expired after
// every re-list). A listedAt ahead of this clock (a snapshot's or a confirmation's) is taken as
// now: the TTL runs from when the list reached the view, not the TTL plus the skew, and later
// confirmations are not ignored as older than a time in the future.
//
// A tools list holds what the catalog and the executor take of its snapshot: a definition over
// subjects.MaxDefinitionBytes, or whose name is over subjects.MaxToolNameBytes, is not in it
// (a tool re-listed so is removed, as the catalog records it, not fresh under its old
// definition).
//
// A Verdict carries the cacheScope and authContext of the list its item is in (its consumers
// decide by them who may learn its state): for an item removed, of the list it was last in, not
// of the list that left it out.
//
// A View holds no I/O and no goroutines: its state lives in memory and is rebuilt by replaying
// the registry stream. It is safe for concurrent use.
package staleness
