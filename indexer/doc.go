// Package indexer maintains the catalog: a materialized view of the registry stream in Badger,
// an in-memory lexical search index over it (package search), and the catalog service that
// answers search, details and servers requests on NATS.
//
// # Consumes
//
// Every message of subjects.RegistryStream (subjects.RegistryAll: snapshots, list_changed,
// confirmations, status and revocations of every server), in stream order, through an ordered consumer: ephemeral, no
// acks, no server-side state. A replica starts at its stored last sequence + 1, or at the first
// message when its directory is empty (rebuild by replay), and then follows the stream. It is
// ready once it applied the messages the stream held when it started; messages deleted from the
// stream (`nats stream rmm`) are not waited for, even when they were its last.
//
// # Produces
//
// Nothing on streams. It serves, in queue group [QueueGroup] (so replicas share the load), and
// answers discovery as micro service subjects.CatalogService ($SRV.PING|INFO|STATS; the
// endpoint subjects are in its metadata, with the replica, Config.Instance and the digest of the
// policy it enforces: subjects.PolicyInfo, compared by `mcpstream policy check`; a replica has
// no enforcement digest, which only executors advertise):
//
//	mcpstream.v1.catalog.<tenant>.search    SearchRequest  → SearchReply
//	mcpstream.v1.catalog.<tenant>.details   DetailsRequest → DetailsReply
//	mcpstream.v1.catalog.<tenant>.servers   ServersRequest → ServersReply
//	                                        (a request whose reply subject is one of mcpstream's own or
//	                                        the server's "$" subjects is not served: subjects.Answerable)
//
// The tenant is the subject's token: the request's principal is resolved within it (another
// principal.tenant → bad_request; a configured user of another tenant → unknown_principal), so
// NATS permissions on the subjects pin each tenant to its own catalog.
//
// Errors are replies with a JSON "error" holding a stable code (subjects.Code…); the micro error
// headers carry the same code. An error reply is its endpoint's reply type with an empty list
// ({"v":1,"tools":[],"error":…}, "servers":[] for servers), a request refused before it is
// decoded (a body over MaxRequestBytes, a subject without a valid tenant token) too; only a
// details reply's not_found holds the tools it found among the names asked for. A reply larger than the connection's max_payload (details of many
// large definitions, a full search at a high k) is answered too_large rather than not at all;
// the definitions of such an answer are read only until what was read could not be sent. The
// max_payload is read from the connection for each reply: after a reconnect to a server with
// another max_payload (a cluster whose nodes differ, a server restarted with a new limit), the
// replies follow the new one.
//
// Servers come in pages, sorted by name: at most ServersRequest.Limit (DefaultServers, at most
// MaxServers; out of range: bad_request with path /limit) after ServersRequest.After (over
// MaxNameBytes: too_large, path /after), and fewer when more would not fit in the connection's
// max_payload; ServersReply.Next, the last name of the page, is set only when a server the
// principal may see follows (servers it may not see are never counted). Client.AllServers
// follows the pages. (Client, the Go client, says what its errors mean: an API error, and a
// request over the connection's max_payload, are the reply's Error; ErrNoCatalog, a closed
// connection, ctx's end and a malformed reply are the returned error.)
// Each server lists the definitions its lists lost (ServerSummary.Rejected,
// at most MaxRejected, the rest counted): registrysync's (Snapshot.Rejected, names redacted
// there) and the catalog's own (no usable name, a name listed twice, too large, name_collision);
// only of lists the principal may see, and under a configured policy only names it may call
// (not a name kept cut to 200 bytes: the whole name is unknown), without a count of the tools
// not kept.
//
// # Ack and retry
//
// There are no acks: the replica's position is the last applied stream sequence, written in the
// same Badger transaction as the data it produced, so a crash between two messages replays
// exactly the message that was not committed. (A snapshot too large for one Badger transaction
// is written in several; the sequence goes in the last one, and since a snapshot is a whole
// replacement, re-applying it after a crash gives the same result.) A malformed message is
// logged with its sequence, counted (Stats.BadEvents) and skipped: it never stops the replica
// and never blocks the stream (a snapshot of more than subjects.MaxSnapshotItems items and
// rejections is one, refused before its items are decoded). Of one snapshot's unusable definitions (no usable name, listed
// twice, too large: Stats.BadItems), the first MaxRejected are logged one by one and one line
// counts the others, so that a message of millions of them does not flood the log at every
// replay. A consumer or connection failure is retried with backoff from
// the last applied sequence until the context ends.
//
// # State
//
// One Badger directory per replica (Config.Dir; Config.InMemory for tests and evaluation):
//
//	m/seq             last applied stream sequence (8 bytes, big endian)
//	m/stream          creation time of the stream it was built from (a recreated stream rebuilds)
//	m/first           stream sequence of the first message applied that is not a confirmation (those
//	                  may expire; a stream purged past it rebuilds, at start or while following)
//	m/format          what this code stores of a stream (catalogFormat): a catalog stored in
//	                  another format (older, or newer after a downgrade) is not read at Open,
//	                  and is dropped and rebuilt by replay when Follow starts
//	m/formatseq       m/seq as of the last commit of a version that keeps m/format (written
//	                  with it): when they differ, an older version applied the last messages
//	                  in its own way, and the catalog is rebuilt as one of another format
//	m/at/<server><kind>  the listedAt the freshness view applied to that list, when its own
//	                  (a snapshot's or a confirmation's) was ahead of the replica's clock and
//	                  taken as the time it came: a restarted replica's view starts from it, so
//	                  a list's TTL runs out when it did before the restart; apart from the
//	                  k/ record (and from the digest), since it depends on this replica's clock
//	s/<server>        last status, server info and description, revocations
//	k/<server><kind>  last snapshot's metadata (fingerprint, listedAt, ttlMs, cacheScope,
//	                  authContext), list_changed flag and the sequence of the ListChanged
//	                  that set it, names of prompts and resources, the definitions left out
//	                  (at most MaxRejected, and a count of the rest); a confirmation of that
//	                  fingerprint (subjects.Confirmed: re-listed unchanged) moves listedAt
//	                  forward, restarting the list's ttlMs, and clears the list_changed flag
//	                  when its afterSeq is at least the flag's sequence (staleness.Answers),
//	                  so a restart or a replay gives the same freshness
//	t/<server><tool>  one tool: its public name and raw definition, byte-faithful (zstd-compressed
//	                  in the value log; never re-encoded)
//	r/<public>        a removed tool's public name → (server, tool, removal sequence), to answer
//	                  "removed"; past Config.MaxRemoved (50,000), the oldest forgotten first
//	                  (the tools one message removes are kept, however many)
//	v/<sha256>        with Config.Embedder: a cached vector (little-endian float32s) by the
//	                  embedder's Name and the embedded text; derived data, not in Digest; entries
//	                  no current tool's text has are deleted at Open, and while the replica runs
//	                  each time it has cached more vectors since than it holds tools plus 256
//	                  (see Hybrid search)
//	v/probe           sha256 of the embedder's Name, then its vector of a fixed probe text: the
//	                  vectorizer embeds the text again when it starts (and when a response's
//	                  probe vector differs, see Hybrid search), and a vector that differs
//	                  (another model answering under the same Name) drops every cached vector
//
// A directory another process holds (Badger locks it) is refused at Open with ErrInUse, naming
// the process (Badger writes its pid in the directory's LOCK file). A catalog Open cannot read
// (a record that does not decode, a value log cut short or corrupted: Badger verifies every
// value's checksum on reads; a table cut short, zeroed or corrupted: Open reads the tables the
// MANIFEST lists, under the directory's lock, and verifies their blocks' checksums before
// Badger opens them, which would panic on the first and serve the last as stored; a MANIFEST
// damaged, or missing while Badger's other files are there: Badger would start from its
// write-ahead log alone, the sequence without most of the records) is refused with
// ErrUnreadable, never served in part: it holds nothing the stream does not, so removing the
// directory rebuilds it by replay. A directory Open may not use (permissions, a read-only
// filesystem, a file in its place, the process out of file descriptors or memory) is an
// ErrStore naming the system's reason. A write that fails while following (disk full, read-only filesystem) ends Follow with
// ErrStore before the sequence moves: the message is applied again when the replica restarts.
//
// (<server> is length-prefixed, so any name is a valid key.) The search index, the freshness
// view (package staleness) and the public-name map live in memory and are rebuilt from Badger
// at Open; schemas are read from Badger only for full answers. Replicas that applied the same
// stream prefix hold identical Badger content (Digest).
//
// # Disk use
//
// Tool records and vectors live in Badger's value log: append-only files of 64 MiB (the last,
// active one preallocated at twice that), which an overwrite or a delete never shrinks;
// compactions of the LSM tree reclaim the space of the keys only. While Follow runs, a value log
// garbage collection pass runs every Config.GCInterval (DefaultGCInterval, 5 minutes; not in
// memory, where there is no value log): Badger's RunValueLogGC(0.5), repeated until it finds
// nothing more or has rewritten 16 files (one per call). A file is rewritten (its live values
// appended to the active file, then the file deleted) when at least half of it is garbage by the
// discard statistics, which Badger's compactions produce: garbage still in a memtable, or only
// in level 0 (with 8 MB memtables, about the last 200,000 writes of the replica), is not known
// yet, and the active file is never rewritten. A replica's value log thus stays within about
// twice its live definitions and vectors, plus those recent writes and the active file,
// whatever the churn (definitions re-listed with changes, servers removed, vectors swept). The
// replica's writes (applying messages, caching vectors), the drop of a catalog being rebuilt
// and Close wait while a file is rewritten (Badger v4.9.6 races a rewrite with concurrent
// commits), queries do not; Follow's end stops a pass after the file it is rewriting. Each pass
// logs what it rewrote and reclaimed (debug, info when it rewrote a file). Stats.ValueLogBytes and
// Stats.ValueLogRewrites show them. A file an iterator still reads when it is rewritten is
// deleted once no iterator reads it.
//
// Badger runs with small knobs (8 MB memtables, small caches, tool records in the value log). A
// replica of 100k tools holds about 160 MB of live heap, under half of it the search index, and
// about 85 MB of file-backed RSS (the binary, and the value log's pages, mapped by Badger); with
// Go's default GC its peak RSS is about 410 MB, with a soft memory limit of 200 MiB about 270 MB.
// `mcpstream indexer` sets that limit by default (its --memory-limit flag; GOMEMLIMIT wins).
//
// # Hybrid search
//
// With Config.Embedder, a background goroutine of Follow attaches a vector to every tool whose
// text (name, title, description, parameters, server description) changed: from the cache, else
// from the embedder in batches of 63, retried with backoff while it fails (longer when a 429 or
// 503 asks for it with Retry-After, up to an hour); a tool re-listed meanwhile gets the vector
// of its new text only. It first embeds the probe text (see v/probe above) with an unrelated
// text, retried likewise, and attaches nothing before: an embedder whose vectors are zero or
// not finite, or that gives the two texts the same direction (the same vector for every text),
// is refused so, with an error that says why (CheckEmbedder makes the same check once). Every Embed call, a batch's or a request's, carries the probe
// text too, and its vectors are used only when the probe's is the one the attached vectors were
// made with (same dimension, cosine at least 0.99): a model changed under the endpoint's name
// while the replica runs (or a load balancer over two versions) never has its vectors ranked
// with the others'. Such a response makes the vectorizer probe again; when the model did change,
// every attached and cached vector is dropped and every tool embedded again (searches are
// lexical meanwhile). The cache is swept while the replica runs too, by the vectorizer (its
// only writer), whenever it has cached more vectors since the last sweep than there are tools,
// plus 256: a server whose descriptions change at every listing (a timestamp in one) leaves a
// vector per tool and listing behind, and the cache stays under about twice the tools plus 256
// (and a batch), the sweep's cost spread over as many vectors cached. A vector a current tool's
// text has is never deleted (the stale keys are checked again against the tools' texts under
// the catalog's lock as they are deleted). The deleted vectors' space in the value log is
// reclaimed by its garbage collection (see Disk use). A batch the endpoint refuses for its
// texts (an embeddings_malformed answer, HTTP 400, 413 or 422: a text too long for the model,
// say) is embedded text by text, and a tool whose text is refused alone while the endpoint
// embeds another text (or answered with a zero vector) goes without a vector, rather than keeping the others of its batch from theirs:
// nothing is cached for it, and its text is asked again after a minute, twice as long after
// each further refusal (up to 6 hours), at once when it changes. When no text is embedded,
// not even the probe text alone (a proxy's error page in an outage), the endpoint is failing:
// every tool waits for its backoff, none is set aside. Each search request is embedded too (bounded
// by Config.EmbedTimeout; the embeddings of the last 1,024 distinct requests are kept) and the search package fuses the vector ranking with the lexical one
// (search.Config.VectorWeight). The permission filter applies to vector candidates exactly as to
// lexical ones. Tools without a vector yet and requests whose embedding fails are served
// lexically (SearchReply.Ranking says lexical rather than hybrid); after a failed request embedding the next ones wait 5 s (doubling up to a minute,
// or as long as a 429 or 503's Retry-After asks, up to an hour), with a warning naming the
// error. A 2xx answer that is not an embeddings response (embeddings_malformed), or a zero or
// non-finite vector for the probe text that goes with the request (not taken for another
// model), is such a failure: it embeds no text, not even the probe text. HTTP 400, 413 or 422,
// or a zero vector for the request's text alone (the probe text's fine), is a refusal of that
// text, which holds off nothing (that search is lexical, nothing cached). Stats counts vectors, pending
// tools and embedder errors.
//
// # Names and permissions
//
// Every tool is exposed as subjects.PublicName(server, tool), always; the catalog maps it back
// to the exact pair. A public name already held by another pair (a 40-bit hash collision of
// encoded names) is refused with a logged error, never shadowed. Permission filtering happens
// before ranking: the policy (policy.Decide), the list's cacheScope (policy.MayUseScope) and
// the freshness state decide which tools are candidates at all, so a tool the principal may
// not call is never returned, counted or hinted at.
package indexer
