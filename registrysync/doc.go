// Package registrysync keeps mcpstream's registry stream in step with the configured MCP
// servers: one connector per server holds an MCP session (stdio, streamable HTTP or SSE, through
// mcp-go), lists its tools, prompts and resources, follows its list_changed notifications,
// reconnects with backoff, and executes tools/call on that session for the executor.
//
// # Produces (stream MCPSTREAM_REGISTRY)
//
//	mcpstream.v1.registry.<server>.snapshot.<kind>  subjects.Snapshot
//	mcpstream.v1.registry.<server>.changed.<kind>   subjects.ListChanged
//	mcpstream.v1.registry.<server>.confirmed.<kind> subjects.Confirmed
//	mcpstream.v1.registry.<server>.status           subjects.Status
//
// A Snapshot is the whole list of one kind over every page (Config.MaxPages caps them; a page
// without its item array ({}: MCP requires the array; "tools": null, as older mcp-go servers
// write an empty list, is one),
// or whose array is not one, and a nextCursor that is not a string, over 64 KiB, or one handed
// out before, are malformed_response: the list fails, nothing is published, the last list is
// kept; a list, or a page,
// of more items or bytes than an event can hold is snapshot_too_large, found by counting the
// items before any is decoded; the bytes are those of the items kept and of the rejections, so
// an item left out as too large takes none of them, and a list reads at most 4 times what an
// event holds of items, kept or left out). Items
// are each definition's JSON exactly as the server sent it, with only insignificant whitespace
// removed (no re-encoding, no HTML escaping: root oneOf/anyOf/$defs survive). Definitions that
// fail validation are left out and listed in Rejected with a code (invalid_definition,
// invalid_schema, definition_too_large, duplicate_name: of valid items of one name, a
// resource's uri, over all pages, the first is kept; secret_in_name), their names redacted
// and cut to 200 bytes; one bad item never fails the list, unless it makes its page unreadable:
// a page over what an event holds plus 1 MiB is snapshot_too_large, one nesting more than
// 10000 levels deep is not JSON to Go's decoder (malformed_response), whatever its other items
// (schemas are otherwise not checked past their shape: $ref cycles and deep nesting are the
// executor's to refuse, per call). The catalog keeps them per server
// and shows them in its servers listing.
// TTLMs is the smallest ttlMs of the pages (absent if none sent one) and CacheScope is
// "private" if any page said so. Odd hints never fail the list, and never widen it: a ttlMs is
// cut to whole milliseconds, a negative one is 0 (expired at once), one that is not a number
// (a string included) or is past 2^53 is ignored (as absent: nothing expires); a cacheScope is
// "public" or "private" in any case, and any other value (an unknown word, "", not a string)
// is private — a list whose scope cannot be read is not shown to every principal; an absent or
// null one is public, MCP's default. AuthContext is ServerConfig.AuthContext, whose credentials the
// list was made with (a private list is for that context only). Fingerprint is a hex SHA-256
// over the set of item hashes, the cache scope, the authorization context, the ttlMs (when
// sent: a list whose TTL alone changed is a new snapshot, but for a longer one up to twice the stored one: keepStoredTTL) and the rejections (a server that reorders an unchanged list does not produce a new snapshot). The message's
// Nats-Msg-Id is <server token>/<kind>/<fingerprint> (the server name encoded with
// subjects.EncodeToken), so JetStream drops a second copy. An unchanged re-list publishes
// nothing: the connector remembers the last fingerprint of every kind and reads it back from
// the stream at start (GetLastMsgForSubject), so a restart does not republish either. A
// Manager keeps at most 256 such reads of the stream in flight, whatever its servers: all its
// connectors start at once, and the NATS server's JetStream API queue (10,000 requests by
// default, shared by every client) drops every request waiting once it is full. A connector's
// reads of its server's last events (at start, around a re-list) have 10 s each from when their
// turn comes, not from when they began to wait for one: with hundreds of servers the turns of
// the last in line come seconds later (at a start, or when every server sends list_changed at
// once), and their reads used to fail for it ("cannot read the registry stream"), each
// connector reading everything again after its backoff. A re-list waits for its turn before it
// holds up the notifier, and a notification's read (does the ListChanged stored before still
// wait for its answer?) has 10 s in all, its turn included, and stores its ListChanged when it
// fails: neither delays a ListChanged behind the queue of reads. A kind
// the server stops offering gets an empty snapshot. A snapshot_too_large reason ends with the
// bound: one event, and the NATS server's max_payload when it binds.
//
// An unchanged re-list of a list that has a ttlMs (on demand, as an executor asks when the TTL
// ran out, a periodic resync, a re-list after a reconnection) publishes a small Confirmed event
// instead (fingerprint and listedAt): consumers restart the list's TTL, so indexer replicas and
// every executor show it fresh again, not only the executor that asked, and a replay restores
// it. One is published only when the list was last published or confirmed at least half its
// ttlMs ago (and at least a second ago), so that short TTLs and frequent re-lists do not flood
// the stream; its Nats-Msg-Id (<server token>/<kind>/<fingerprint>/confirmed/<period number>)
// makes concurrent connectors of one server store one per period. It is stored with a
// per-message TTL (Nats-TTL) of twice the ttlMs, at least an hour: the stream drops it once the
// list would be out of date anyway without a later event (kept as long or longer), so a server
// whose list never changes does not grow the stream, and every replay, without bound. It never
// answers a ListChanged alone (below: those are answered by a snapshot or a Confirmed kept for
// good). A registry stream declared without allow_msg_ttl refuses the TTL: the event is stored
// without one, with a warning, and confirmations go without one for 10 minutes.
// The half TTL counts from the listedAt this connector last published or confirmed, or read back
// from the stream at start (or from a snapshot another connector of the server stored first): one
// stamped by another host whose clock is ahead of this one's is taken as now, so that it does
// not hold the confirmations back by the skew.
// A list without a ttlMs (nothing expires) or with a ttlMs of 0 or less (expired at once) is
// never confirmed this way. Every Confirmed carries afterSeq, the stream sequence of the last
// ListChanged of the kind on the stream (whoever stored it) when the re-list began (absent if
// none).
//
// A list_changed notification is published as a ListChanged event at once (consumers mark the
// list stale whatever its TTL said); bursts are debounced (Config.Debounce) and the kind is
// re-listed. Its Nats-Msg-Id is <server token>/<kind>/changed/<connector id>/<number>, new for
// every event: a publish that fails (a timeout, a PubAck lost after the stream stored it) is
// made once more under the same id, so the stream stores it once and the connector learns its
// sequence (a duplicate's PubAck carries it). Every re-list of a kind first reads the stream's
// last ListChanged of it (a read that fails fails the kind, as a failed publish does: it is
// listed again after the retry backoff), so it answers the ListChanged consumers hold the list
// stale for: its own whose PubAcks were lost, or one that another process running the server
// stored and never answered (it ended before its re-list). If the content changed, a Snapshot follows; if not, a Confirmed event whose
// afterSeq is the ListChanged's sequence answers it (Nats-Msg-Id <server token>/<kind>/
// <fingerprint>/confirmed@<that sequence>, so concurrent connectors store one), whatever the
// list's ttlMs: consumers holding that fingerprint make the list fresh again, and no copy of the
// snapshot is stored; a Confirmed answers only when the stream's last snapshot has that
// fingerprint (another connector of the server may have stored another list since: then the
// list is published as a Snapshot). A consumer therefore treats a kind as stale from a
// ListChanged until a Snapshot with a higher stream sequence or a Confirmed that answers it
// (subjects.Confirmed). Only a list that began after the ListChanged was stored answers it;
// the connector publishes no further ListChanged while one waits for its answer, as the stream
// shows it (no Snapshot nor Confirmed of the kind stored after it, whoever stored them). Such a
// notification held back (or one whose ListChanged could not be stored) is not forgotten when
// another connector of the server (another process: a hand-over, a stdio child of its own)
// answers the waiting ListChanged with a list that began before that notification, its
// session not having seen the change: while it holds one back, the connector watches the
// kind's snapshot and confirmed subjects (core NATS), and the first answer it sees there (a
// Snapshot, or a Confirmed whose afterSeq reaches its waiting ListChanged) makes it store a
// ListChanged at once and re-list the kind (a re-list already scheduled is not postponed):
// consumers are fresh only between that answer and the ListChanged, a NATS round trip. One per
// answer seen: the ListChanged ends the watch, and so does a list of the connector's own that
// began after the notification, once published, and a notification that came before such a
// ListChanged or list is not held back (an answer to it began after the notification); a
// flood of notifications stores no more, and reads the stream once per waiting ListChanged,
// not at every notification (stillWaits: the watch, up before that read, sees any answer
// stored after it). The
// watch's subscriptions have no pending limits (the NATS client never drops their messages as
// a slow consumer; the server cutting a slow connection is a disconnection), and an answer
// stored while the connection was down is read from the stream once it is back (the last
// snapshot of the kind stored after the waiting ListChanged, or any Confirmed stored after it
// whose afterSeq reaches it, even behind a later one that answers nothing; past 256 Confirmed
// events after it, one is taken to be there), so that consumers have the list fresh until the
// connection is back, no longer until the connector's own re-list (the debounce after the
// notification or, its re-lists having failed while NATS was away, the retry backoff, up to
// BackoffMax). What remains: in a cluster, an answer stored before the watch's interest
// reached the server it was sent to leaves consumers fresh until that re-list. A
// restart reads back the last Confirmed's afterSeq as answered, never past that Confirmed's
// own sequence. A list that was in flight when a
// notification arrived is not published (it may predate the change and would look current
// after the ListChanged); the re-list the notification scheduled publishes instead (after 3
// such drops in a row, a list is published anyway, so a server that never stops notifying still
// gets snapshots; it may predate the notification that came during it, whose ListChanged the
// connector may not have stored (one waited already): unchanged, such a list answers no
// ListChanged, and changed, its snapshot is followed at once by a ListChanged, so consumers hold
// the list stale until a re-list that began after that notification). Nor does such a list's failure count against the server (its status, the retry
// backoff): its list changed under the pages (a server refusing the old list's cursor with
// -32602, or handing one out again), and the scheduled re-list lists it whole; 3 drops in a row
// count, as above. The Snapshot's "@<sequence>" suffix is used when content A is listed again
// after B within the de-duplication window, or a changed list overtaken by a notification is
// published after the ListChanged.
// A kind whose re-lists after a list_changed found it unchanged twice in a row is re-listed,
// after each further notification, no sooner than twice the debounce after it, doubled again
// for every further such re-list up to maxDebounceFactor (10) debounces (and never more than
// Config.BackoffMax), until a list finds it changed. A server that keeps notifying changes it
// does not make used to have a whole copy of its list stored per notification; now each costs
// the stream a ListChanged and a Confirmed (a few hundred bytes, whatever the list's size), so
// the delay only paces the re-lists (the server's tools/list load and those small events: at
// most two per 2.5 s at the default debounce) while keeping the window in which its tools are
// stale, and refused, short. The ListChanged of the first notification is still published at
// once. The delay also holds the other re-lists such a kind has scheduled (after a server is
// reclaimed, or a legacy SSE stream reopens) until a list finds it changed.
//
// Status events are published only when (status, code) changes:
//
//	connecting   first attempt of this process
//	ready        connected and every kind listed and published (or confirmed unchanged);
//	             Protocol holds the negotiated version. A ready status with a Code means a
//	             prompts or resources list failed while the tools are current.
//	unavailable  connect_failed (malformed_response when the handshake's answer is not
//	             JSON; a handshake an HTTP server refuses with a 4xx says its status, and
//	             a 429 its Retry-After; one that timed out says which request,
//	             server/discover or initialize, went unanswered within ConnectTimeout),
//	             connection_lost, or a failed tools list (list_failed,
//	             malformed_response, too_many_pages, snapshot_too_large); Attempt and
//	             RetryInMs tell the backoff (at least an HTTP 429 or 503's Retry-After:
//	             see Failure handling). Reasons are redacted (ServerConfig.Secrets and
//	             the values of headers, env variables and URL query parameters named like
//	             credentials, by words not substrings: see State, become "[redacted]").
//	             connector_stopped: published once the Manager stops (Run returns), for
//	             each server no other process answers for and nobody removed meanwhile
//	             (a "removed" status on the stream stays the last word). Not when NATS is
//	             not connected then (logged): watchdogs declare the servers lost once their
//	             heartbeats stop (connector_lost), and the next start publishes their status.
//	removed      Manager.Remove, followed by an empty snapshot of every kind the server had.
//
// Every status names this process's connector id (drawn at New) in Connector and, while the
// process runs the server, its heartbeat period in HeartbeatMs (Config.HeartbeatEvery, 5 s).
//
// # Heartbeats
//
// While Run runs, a subjects.Heartbeat goes out on subjects.HeartbeatSubject(id) every
// HeartbeatEvery (core NATS), stopping included: until the calls in flight have drained and
// connector_stopped is published, and, for the servers another process answers for, until their
// status no longer names this process (that process's claim, below). Watchdogs (package liveness, in every indexer replica) declare the
// servers of a process silent for subjects.MissedHeartbeats periods unavailable
// (connector_lost); a process still running that sees such a declaration about one of its
// servers — live, or on the stream after a reconnection or after the NATS client dropped
// statuses (its subscription past its pending limits: a warning says how many) — publishes the
// server's current status again (a stopping process, until it retires its servers: from then
// on the last word on each is its connector_stopped, or the status of the process that answered
// its probe, which reclaims a declaration itself; published by the stopping process, the status
// would name a process about to stop beating). So it does, while it runs (not stopping), for another
// process's connector_stopped or removed status of a server it runs (made while it was cut off,
// or when it answered a probe too slowly), and after a removal it publishes the server's lists
// again too.
//
// At every heartbeat period a running Manager also reads the registry stream's info (one
// request, whatever its number of servers): when the stream no longer holds what a connector
// stored or found there (its last status, the snapshot of a kind: purged whole with `nats
// stream purge`, or up to past them), or was deleted and created again (its creation time
// changed), the connector forgets what it knew of the stream and publishes again its current
// status and, at its next re-list (at once when connected, else when it connects), every list,
// as at start: catalog replicas rebuild from the stream, and they, and executors started since,
// would otherwise know none of its tools until a list changed or the process restarted. JetStream
// keeps the Nats-Msg-Id of a purged message until its de-duplication window ends (a stream
// created again starts with none): a snapshot answered as a duplicate of a message the stream
// no longer holds is published again under <id>@<the duplicate's sequence>, an id of its own
// (passing over those that copies stored after earlier purges took, a few at most).
//
// Whether another process runs a server (before connector_stopped, and before Remove retracts a
// server this Manager does not run) is asked on its relist subject with a kind no server lists:
// a registrysync answers at once (bad_request) without listing; only an answer within a second
// counts, a subscriber that never answers is nobody. A stopping Manager probes every server at
// once and publishes their connector_stopped (64 at a time) within one 5 s budget, so such a
// subscriber costs it a second however many servers it runs; the servers it had no time left
// for are named in its log ("time is up") and keep their last status until a watchdog declares
// them lost. A process that answers the probe publishes its current status again if the last
// one names another process with heartbeats (the one about to stop), so that watchdogs do not
// declare the server lost once those end. Anyone on NATS may send such probes, naming whom it
// likes: the claims of one server run one at a time, each reading the last status once for
// every probe that came meanwhile and publishing the status at most once, and one that
// published is followed by the next only after HeartbeatEvery (a claim the probe of a stopping
// process asks for is so up to a heartbeat period late, later on a loaded host or with a slow
// NATS). The stopping process therefore keeps beating until the last status of every server
// whose probe was answered no longer names it (one ordered consumer on the status subjects,
// whatever the number of servers), for at most two heartbeat periods and a second within the
// 5 s budget: no watchdog declares the server lost in between, a claim that late included. A server
// whose last status names another process already (that process's claim landed, or the stopping
// process was not the one running it) is not waited for, nor anything once NATS goes away; a
// claim that does not come in time is logged. A flood of probes costs a server one goroutine and one stream read at a time,
// and at most one status event per HeartbeatEvery; the answer to each probe is unchanged.
//
// # Serves
//
// Core request/reply in the queue group "mcpstream-registrysync" (a micro service of that name
// answers $SRV discovery), with a relist and a dispatch endpoint per server this process runs:
// two queue subscriptions per server, which Manager.Remove ends (so several processes, each with
// its own servers, share one NATS: a request reaches the one that runs its server, and a server
// no process runs, or no longer runs, has no responders):
//
//	mcpstream.v1.control.relist.<server>  RelistRequest → RelistReply
//	mcpstream.v1.dispatch.<server>        DispatchRequest → DispatchReply
//
// Both answer bad_request to malformed JSON and to a request of another version than 1 (no "v"
// is version 1; nothing runs), and not_found for a server removed while the
// request was on its way (Manager.Remove). A server's re-lists run one at a time; at most 64
// wait (maxRelistWaiting: a flood of relist requests must not grow the process by a goroutine
// per request), and one more is answered unavailable at once. While the server is not
// connected (connecting, or reconnecting: backoff or a handshake in progress) a re-list is
// answered unavailable at once, with the status' reason; one waiting its turn when the
// connection is lost is answered unavailable then, with why, not at its deadline (the
// executor's call would wait its RelistTimeout for it). A re-list that fails is answered
// unavailable, with retryAfterMs when the server refused the list HTTP 429 or 503 with a
// Retry-After; while that wait runs, a re-list of the kind is answered so at once (the wait
// left), nothing sent to the server (see Failure handling). Neither serves a request whose reply subject is one
// of mcpstream's own or the NATS server's "$" ones (subjects.Answerable): it is dropped, and
// nothing runs (nor does a dispatch without a reply subject). Dispatch replies carry the raw CallToolResult; an error code says whether the call was
// sent (protocol_error, timeout, outcome_unknown) or not (unavailable, bad_request, too_large,
// not_found).
// A tools/call an HTTP server refuses unrun — 404 for a session it no longer knows (it
// restarted), 401 for the host's credentials — is unavailable, and the session is lost at once:
// the connector reconnects, or reports why it cannot. A session lost so (by any request's 404
// or 401, the listening GET's included) is closed once its calls in flight are over (each
// within its own deadline; DrainTimeout once the connector stops), not at once, which cut them
// off as outcome_unknown: each reads its own answer, the server's 404 to it a refusal (nothing
// ran), a call the server had taken its result. One whose POST the server (or a proxy in
// front of it) answers with a status that by HTTP says it was not processed is refused too, the
// session kept: 429 is unavailable with retryAfterMs from a Retry-After (at most an hour),
// 403, 405 and 415 unavailable, 413 too_large, 400 and 422 bad_request. A 5xx, 503 included,
// stays outcome_unknown: the server may have run the call (a proxy answers 503 when the
// server's connection ends after the request went out), with a 503's Retry-After as its
// retryAfterMs (the executor retries a read-only tool's unknown outcome, not before). So does a 404 or 401 that comes after
// the POST was accepted (on the GET that resumes the call's event stream): the session is
// lost, but the call was taken. (A 400 or 422 whose body is a JSON-RPC error is the server's
// protocol_error; the other statuses above say what happened whatever the body: a rate
// limiter's 429 with a JSON-RPC error is unavailable with its Retry-After.)
// A server's JSON-RPC error becomes protocol_error with its code and its message, redacted and
// cut to 1 KiB (also in list failures and logs): a hostile server's message may be megabytes.
// So does an answer the call's id carries that is not of a JSON-RPC response's shape (an
// "error" that is neither an object with an integer code nor a string, a "jsonrpc" that is no
// string; over HTTP also a JSON body that is not valid JSON but whole, a NaN in it: a body cut
// short is outcome_unknown, as the connection may have failed), in a JSON body as on an event
// stream or a stdio line (mcp-go dropped it there, and the call failed outcome_unknown when the
// stream ended, or waited out its timeout, as did a list, malformed_response now), and a result whose isError is not a boolean or whose content is
// not an array of objects (null or absent are fine; names in any case, as encoding/json reads
// them), which the executor read as a success: the call ran (a content item of a type this
// version does not know is passed on); such a result, its secrets redacted, goes with the
// answer in DispatchReply.Withheld for the executor's audit trail (left out when the answer
// would not fit in a NATS message with it).
// Manager.Dispatch and Manager.Relist are the same in-process.
//
// A tool whose definition in the last tools listing says execution.taskSupport "required" is
// called as a task (tools/call with a task, tasks/get at the server's pollInterval within 100 ms
// to 5 s, then tasks/result), within the same timeout: the reply is its CallToolResult, as for
// any tool. A task that asks for input (input_required), reports an unknown status or is
// cancelled by the server ends protocol_error; a deadline that passes sends tasks/cancel and
// ends timeout. A tasks/get that fails is asked again (the call ends outcome_unknown, and the
// task is cancelled, after 3 failures in a row), not before the Retry-After of an HTTP 429 or
// 503 that refused it nor before the task's pollInterval (a Retry-After past the deadline
// cancels the task and ends timeout at once, with retryAfterMs; a pollInterval past it, the
// Retry-After within it, is waited out until the deadline, which ends timeout as any does,
// without); one answered with what is not valid JSON or no
// JSON-RPC response (see above) is not: protocol_error at once, the task cancelled. A
// tasks/cancel is sent once, best effort, off the call's path (5 s at most): one that fails, a
// 429 from a server still shedding load included, is logged (a warning with the task, the HTTP
// status and its Retry-After), never sent again, and the call ends as it would have (the task
// may run on until its ttl, the call's timeout, passes); one refused -32602 (a task already
// ended, or one the server does not know) is logged at info with the server's message. 2026-07-28 has no tasks/result: on such a
// session a task tool is refused unavailable, nothing sent (ServerConfig.ProtocolVersion
// "2025-11-25" runs it).
//
// # Notifications per protocol and transport
//
// The client first probes server/discover (2026-07-28) and falls back to initialize, unless
// ServerConfig.ProtocolVersion pins a version: pinned to 2026-07-28 server/discover has the
// whole of ConnectTimeout and, failed, fails the connection (initialize is not sent), pinned to an earlier one server/discover is not
// sent, and an initialize answered with another version fails the connection. A discover result whose supportedVersions does not
// list the version asked for (a legacy server answering every unknown method with an empty
// result) is read as the -32022 such a server would send, so mcp-go asks again at a version it
// listed or initializes; a -32022 that lists the version asked for is asked again once, rather
// than falling back to a handshake a 2026-07-28 server refuses (discover.go). On 2026-07-28 nothing is pushed until the client
// opts in: the connector keeps a subscriptions/listen stream open for the list_changed kinds the
// server declares, waits for its acknowledgement before the first list, and re-lists everything
// whenever the stream has to be reopened. On legacy stdio and SSE notifications arrive by
// themselves. On legacy streamable HTTP they need the standalone GET stream, which pins the
// transport to the legacy protocol: such a server is reconnected once with continuous listening
// (remembered for later reconnects when the server said it is legacy: a JSON-RPC error or an
// HTTP 4xx other than 408 and 429 answered server/discover; mcp-go also falls back to
// initialize for one connection when server/discover got no answer within half of
// ConnectTimeout (at least 5 s: a server slow to start still answers in time), or an
// HTTP 5xx, 408 or 429 (not a 429 or 503 with a Retry-After: the connection fails, and is
// tried again after it, below), and such a connection is not remembered: the next reconnection probes
// server/discover again; discover.go), and every kind is re-listed whenever that stream (re)opens,
// since notifications sent while it was down are lost (a GET resuming a request's own event
// stream, Last-Event-ID, is not that stream and re-lists nothing; backing off from 1 s to 30 s between
// re-lists while the stream keeps ending at once). A tools/call that times out on a legacy
// streamable HTTP connection, or on any HTTP+SSE connection (2026-07-28 too: its requests have no
// stream of their own to end), is cancelled with notifications/cancelled (closing the request is
// no cancellation there). Requests a server sends (ping, sampling, elicitation, roots...) are
// answered by the connector on every transport, outside mcp-go, as the stream carrying them
// is read: ping with an empty result, anything else with -32601 (method not found: the
// connector declares no client capability). A server that floods them while it does not take
// the answers stalls its own stream. (mcp-go's SSE transport would take them for responses;
// its streamable HTTP transport answered each on a goroutine of its own.) On streamable HTTP
// an answer whose id is not its request's (a gateway that mixes its streams up) is never
// taken for the request's: on the request's event stream it is skipped, and the stream ends
// after the request's own answer; as the whole body, it fails the request (a tools/call
// outcome_unknown, a list malformed_response). mcp-go's transport errors are logged as a
// warning once per kind and session, then at debug level: a server cannot fill the log by
// sending what mcp-go complains about.
//
// # Failure handling
//
// Stdio children are started by the connector itself in their own process group (on Linux
// with a parent-death signal: the kernel SIGKILLs a child whose process dies without stopping
// it), with a minimal inherited environment (PATH, HOME, USER, LANG, TMPDIR, the npx and uvx caches...)
// plus ServerConfig.Env, so other servers' credentials never reach them
// (ServerConfig.InheritEnv passes everything); a command without a path separator is looked
// up on the PATH that Env sets, if it sets one (as the MCP SDKs do; its entries that are not
// absolute, such as ~/bin, are passed over), else on this process's.
// Their stderr is drained and logged at debug level, redacted (of a very long line, its
// start); a child that ends is reported with its exit status and the last three stderr lines
// that tell why, joined by " | " (stack frames, indented lines, and node's "Node.js v20..."
// trailer are passed over: of an uncaught node error, its message; the last line if none
// tells); the connector waits up to 250 ms for them after a broken pipe or a closed stdout,
// which a crash shows first. A session of a child that runs on fails (a handshake that timed
// out or was answered badly, a lost connection) with those lines quoted after its reason
// ("... (stderr: ...)"). The warnings "connect failed" (first attempt and every tenth) and
// "connection lost" of a stdio server also carry, in their stderr field, the child's last
// stderr lines whatever they say (stack frames too): at most 20 lines and 4 KiB (the last line
// kept whatever its size), each redacted, cut to 300 bytes and with control characters and
// bytes that are not UTF-8 replaced, as the debug lines are. A child that closes its stdout but runs on can answer nothing:
// its session is lost at once (connection_lost, "the server closed its stdout") and the child
// stopped (stdin closed, SIGTERM to its process group after 2 s, SIGKILL after 3 s more). A stdout line that is broken JSON (cut short, or holding a NaN as Python's
// json.dumps writes) fails the tools/call it answers at once with protocol_error ("not valid
// JSON", where it breaks, and how it begins, redacted), when its id can be read at its start or
// as its very last member as that of a line too large is (below) and is exactly a waiting
// call's; any other broken line (another id, none, a request) fails no call, but the
// handshake or the lists in flight with malformed_response at once (mcp-go would skip it and
// let the request time out, as a call used to wait out its timeout); plain text on stdout is
// logged and ignored. An HTTP answer that is not valid JSON — a JSON body, or an event of a
// request's stream or of a legacy SSE stream whose id can be read so — fails its request the
// same way (a tools/call protocol_error, a list or the handshake malformed_response), not as a
// failed connection (outcome_unknown, "unexpected nil response" from an event stream, or a
// legacy SSE call left waiting for its timeout). While no tools/call waits for an answer, a stdout line
// is capped as an HTTP response is (what an event holds, plus 1 MiB); otherwise at 64 MiB.
//
// A message too large to take — a stdout line over its cap, an event of an HTTP or SSE event
// stream over the same bound as an HTTP body — is discarded up to its end (its newline, the
// blank line ending the event); the connection and the other requests go on. Only an answer
// whose id can be read at its start (members "jsonrpc" and "id" before "result" or "error") or
// as its very last member (as the TypeScript SDK writes it) fails its request, if one waits:
// a tools/call result_too_large, a list snapshot_too_large, the handshake
// malformed_response. A notification, a request of the server's or a message whose id cannot
// be read so is logged (a warning once per session, then debug) and fails nothing. (A too
// large event used to end the whole legacy SSE connection, and a too large stdout line of any
// kind failed every list in flight.) An HTTP body over the bound fails its request (a list
// snapshot_too_large, a tools/call result_too_large).
//
// JSON-RPC batches (a JSON array; MCP 2025-03-26 had them, later versions dropped them) are
// taken apart on every transport — a stdout line, an event, a streamable HTTP JSON body — and
// each message handled as if it came alone: answers matched by id, requests answered,
// notifications followed. A batch of more than 1024 messages, an empty one or one holding
// anything but objects is refused whole: on a request's own HTTP stream that request fails (a list
// malformed_response, a tools/call protocol_error: it was sent), on stdio it fails the
// handshake and lists in flight as a line that is not JSON does, and the tools/calls answered
// by any of its first 1024 messages whose id can be read so (protocol_error), on a legacy SSE
// or a listening GET stream it is logged and dropped. The connector never sends batches itself.
//
// HTTP and SSE servers: every request goes to the configured URL's origin (scheme, host, port)
// only, since the configured headers go with it: redirects are followed within it, and a legacy
// SSE endpoint event naming another, or no URL, fails the connection at once (mcp-go compares
// host and port only: an https server's http:// endpoint on the same host would have the
// credentials sent in clear text; and it waited on for another endpoint until ConnectTimeout), as
// does an event stream that ends before its endpoint event. An endpoint of the configured origin
// whose host is written otherwise (a default port written out or left out, a name's case) is
// passed to mcp-go with the configured URL's host, which mcp-go compares it with as written. A
// response's headers are bounded by maxResponseHeaderBytes, its body by cappedTransport. List
// results are taken as raw bytes and never decoded by mcp-go, so the connector mirrors x-mcp-header arguments into
// Mcp-Param-* headers of tools/call itself (2026-07-28, from the last tools listing, reading the
// definitions' members by their exact names as the catalog does: an "InputSchema" or "Name"
// binds nothing). tools/call on stdio skips
// mcp-go: the request frame is written straight to stdin (frames from mcp-go and from the
// connector are serialized whole), and the reader hands the response, recognized by its id
// ("mcpstream-N"), straight to the waiting call; every other line goes to mcp-go's transport.
// Stopping a child closes its stdin, then sends SIGTERM and SIGKILL to its group after grace
// periods. Manager.KillChildren, for a process about to exit without a clean stop, sends SIGKILL
// at once to the group of every child not yet stopped (and of any started after it).
//
// A connect or handshake failure, a stdio child that exits (noticed at once: the connector
// starts the process itself), a lost SSE stream, a failed list whose liveness probe also fails,
// or a periodic probe that fails (Config.PingEvery: ping on legacy, server/discover on
// 2026-07-28) closes the session and reconnects with exponential backoff (Config.BackoffInitial
// to BackoffMax) until the context ends; stdio servers get a new process. The backoff starts
// over at BackoffInitial when the lost session had lasted BackoffMax: a server that fails
// sooner after each connection (a crash loop) gets growing waits, one lost after a healthy
// spell is reconnected at once. A handshake, a
// list or a probe that an HTTP server answered 429 or 503 with a Retry-After (delta-seconds or
// an HTTP date) is tried again no sooner than it asked, up to 10 minutes (maxRetryAfterWait; a
// malformed or past value is ignored, and the backoff's wait is kept when it is longer): the
// reconnection after it (RetryInMs says the wait; so refused are also the handshake's
// server/discover, which is then not followed by initialize, a periodic probe, and a legacy
// SSE server's opening GET), the re-list of the kinds that failed (counted from that answer:
// re-lists of other kinds meanwhile do not put it off). Until then no re-list asks the server
// for such a kind (a list_changed's, a resync, a reopened stream's: the retry lists it), nor
// does a reconnection meanwhile (the new session holds the kind, failed as it was, and its
// retry comes when the wait has run; a kind the new session does not offer is retracted at
// once, its empty list asking the server nothing), a relist request for it is answered unavailable at once with retryAfterMs, the wait left, and
// the list's failure is not followed by a liveness probe. Each kind whose list fails is
// retried on a backoff of its own (BackoffInitial to BackoffMax), advanced by its own failures
// only: re-lists of other kinds, and their failures, neither lengthen nor put off its retry. Closing a legacy
// streamable HTTP session sends its DELETE without waiting for the answer (mcp-go waits up to
// 5 s: a hung server held the connection_lost status, the reconnection, Remove and a stopping
// Manager that long); closing a 2026-07-28 session over SSE cancels its subscriptions/listen
// with notifications/cancelled the same way, its event stream kept open until then (a request
// there has no stream of its own whose end would cancel it, a server that kept it held a
// goroutine per session closed, and an SSE server forgets a session whose stream ended: a
// cancellation sent after the stream was cut was often refused). A closed HTTP
// or SSE session's keep-alive connections are closed with it, not left idle until the
// transport's 90 s idle timeout (a socket here and one on the server per session). A server that answers
// badly (malformed JSON, endless cursors) keeps its session and is re-listed with backoff. Each
// connector runs on its own goroutines; panics in its loop and in mcp-go callbacks are
// recovered and reported (a panicking loop publishes unavailable with code internal and
// starts over after BackoffMax). A panicking dispatch handler answers outcome_unknown: the
// call may have been sent before it; a panicking re-list answers internal.
//
// # Ack and retry semantics
//
// Publishing is synchronous (the stream sequence is needed for the replies and for
// confirmation); a publish that fails is retried with the kind's list backoff and never blames the
// server. So is a re-list whose read of the kind's last list_changed fails (NATS away): that
// failure is logged as an error once per connector until a read succeeds (the retries at debug
// level), and the first read that succeeds again says so. Events are not acknowledged by
// consumers: the stream keeps history and consumers replay it.
//
// # State
//
// The caller declares the streams (subjects.EnsureStreams) before Run; a connector that
// cannot read the registry stream retries with backoff and does not connect meanwhile.
// Nothing on disk. The last fingerprint and sequence of every server and kind live in memory
// and are rebuilt from the registry stream at start; credentials live only in the
// ServerConfig values the caller passes in. A tool result or a listed definition that holds
// one of a server's secret values (as is or JSON-escaped) has it replaced by "[redacted]"
// before it is published or answered (re-encoded then; otherwise byte for byte). A definition
// whose name (a resource's uri) holds one is rejected (secret_in_name): under the redacted
// name it could not be called. A URL's user info counts in the Basic credential net/http makes
// of it too, and its user name without a password (https://TOKEN@host) when it looks like a
// token (pathToken); a configured Basic Authorization header, decoded too. A Go byte dump ("[123 34 ...]", as mcp-go quotes an answer without an id)
// whose bytes hold a value is replaced whole in errors, reasons and log lines; so is the start
// of a value (3 bytes or more) just before a cut ("…": a server's words quoted cut to size, a
// cursor, a schema's type, an id, a long stderr line, are redacted only as the message leaves). A header, env variable, URL query parameter or cookie is a credential by the words
// of its name (split at non-alphanumerics, camelCase and digits), never by a substring: a word
// is or ends with token, secret, password, passwd, passphrase, credential, authorization
// (authorisation), authentication, cookie, signature, auth or mnemonic (or their plurals), or
// is pass or sig, or ends with pwd (not PWD alone); or a word is or ends with key(s), unless
// the key sorts, identifies or deduplicates data (sortKey, primary_key, Idempotency-Key; not
// AZURE_SEARCH_KEY, GOOGLE_MAP_KEY, routing_key) or every word after it is about the key, not
// the key (keyName, KEY_FILE, keys_only; PRIVATE_KEY_PEM and KEY_2 are keys); or the name ends
// with pat, jwt, pw, dsn, connection string, webhook (url), seed phrase or session string
// (GITHUB_PAT, PINATA_JWT, SENTRY_DSN, SLACK_WEBHOOK_URL; not JWT_ISSUER, WEBHOOK_EVENTS), or
// is just code (Azure Functions' ?code= key).
// So author=, authority=, keyword=, keys_only= and sortKey= hold no secret: taken for one,
// their value ("john") would be redacted from every result and tools named with it rejected.
// A lower-case compound that ends with key (monkey) counts, as an unknown vendor's stripekey.
// Any credential's word followed only by words about it (its file, URL, type, size, lifetime,
// scope, issuer, host or port, rate, or whether it is enabled: TOKEN_URL, AUTH_ENABLED,
// AUTH_SCOPE, PASSWORD_FILE, SECRET_NAME, TOKENS_PER_MINUTE; a number among them counts for
// nothing: AUTH0_DOMAIN, but TOKEN_2 is a token) names no credential, nor token(s) after max, min, num or total,
// nor tokens after input, output, prompt, completion, new... (MAX_TOKENS, max_new_tokens: a
// model's token count; INPUT_TOKEN is a credential). An environment variable whose value is a
// URL gives that URL's password and credential parameters whatever its name
// (DATABASE_URL=postgres://user:PASSWORD@host); one whose value is a JSON object gives its
// members named like credentials, at any depth (OPENAPI_MCP_HEADERS={"Authorization":"Bearer
// X"}, a service account's private_key).
package registrysync
