// Package executor is mcpstream's host broker: it executes tool calls safely on behalf of
// principals — the right server and original tool name, fresh definitions only, the one policy,
// the server's real inputSchema, rate limits and concurrency caps shared by every worker,
// credentials that stay with the connectors, and an audit trail.
//
// # Consumes and produces
//
//	mcpstream.v1.exec.<tenant>            request/reply, queue group "mcpstream-executor" (front end):
//	                                      CallRequest → CallResult. Checks the envelope (a refusal of it,
//	                                      bad_request or too_large, or of the calls stream's, too_large
//	                                      or unavailable, is recorded in the audit stream as a
//	                                      worker records the same request on calls.<tenant>: request,
//	                                      decision, and with an id the result; see
//	                                      auditRefusedEnvelope) and persists the
//	                                      request on the calls stream (Nats-Msg-Id = call:<tenant>:<id>,
//	                                      Mcpstream-Reply-To = the caller's inbox): the worker answers the
//	                                      caller directly. A duplicate id gets the earlier answer
//	                                      (duplicate: true); a reply subject outside Config.ReplyPrefixes
//	                                      ("_INBOX.") is answered by the front end from the results subject;
//	                                      one without a reply subject is persisted, not waited for.
//	                                      A request whose reply subject is one of mcpstream's own or the
//	                                      server's "$" subjects (subjects.Answerable) is dropped, not run:
//	                                      NATS does not check reply subjects, and the answer would be the
//	                                      executor's write to another tenant's calls, results or slots.
//	                                      A publish without a PubAck may be stored: it is published again
//	                                      (same Nats-Msg-Id), and answered timeout, never refused, when
//	                                      no PubAck comes (see persist).
//	mcpstream.v1.calls.<tenant>           stream MCPSTREAM_CALLS (work queue), durable consumer
//	                                      "mcpstream-executor" shared by every worker of every process.
//	                                      Callers that do not wait publish here and watch the result; a
//	                                      Mcpstream-Reply-To header under Config.ReplyPrefixes also gets
//	                                      the answer, published there after it is stored (no other
//	                                      subject is ever published to from a header, nor one of
//	                                      mcpstream's own or the server's "$" subjects, whatever the
//	                                      prefixes: subjects.Answerable); a request
//	                                      refused with no answer to store (no or bad id, not a
//	                                      CallRequest, no valid tenant token) is answered there alone.
//	                                      The stream captures calls.>, but only calls.<tenant> is a
//	                                      call: a subject with more tokens (calls.<tenant>.x) is refused
//	                                      bad_request as one without a valid tenant token, never run.
//	mcpstream.v1.results.<tenant>.<id>    stream MCPSTREAM_RESULTS: exactly one CallResult per call id
//	                                      (Nats-Msg-Id "result:<tenant>:<id>"; Mcpstream-Call-Seq: the
//	                                      calls stream sequence of the request whose worker published
//	                                      it, so a front end tells another request's answer: duplicate).
//	mcpstream.v1.audit.<tenant>.<event>   stream MCPSTREAM_AUDIT: request, decision (with its code;
//	                                      also needs_approval, approved), dispatch (side-effecting
//	                                      tools: the point after which the outcome may be unknown),
//	                                      result; arguments and results redacted (sensitive keys,
//	                                      configured secret values), capped (4 KiB) and UTF-8
//	                                      (invalid bytes as U+FFFD: the answer keeps them); the
//	                                      message redacted too (also the start of a value just
//	                                      before a "…" where quoted words were cut), and the call
//	                                      id, tool, server, user and roles (configured secret
//	                                      values: auditor.redactFields; the id's keys, results
//	                                      subject and Nats-Msg-Id, and the answer keep it); user,
//	                                      roles, tool and message cut (capAudit), and an event
//	                                      NATS would still refuse stored without them.
//	                                      Published asynchronously and at least once: an event
//	                                      not stored is published again until it is (see auditor).
//	                                      A call's decision events are one per step that decided,
//	                                      in pipeline order: the admission's (a refusal, or
//	                                      allowed once steps 3-6 pass; needs_approval, then
//	                                      approved or the refusal, for step 7), then a
//	                                      later step's refusal or the dispatch's failure code
//	                                      (a plain call over its rate: allowed, rate_limited); the
//	                                      last is the answer's.
//	                                      A result event records the answer given: the id's earlier
//	                                      stored answer when a resend past the de-duplication window
//	                                      ran again (its message says how that run ended; see finish).
//	mcpstream.v1.approvals.<tenant>.<id>  request/reply: Approval → ApprovalReply, for calls waiting in
//	                                      needs_approval (`mcpstream approve|deny ID`).
//	mcpstream.v1.registry.>               stream MCPSTREAM_REGISTRY, replayed from the start by an
//	                                      ordered consumer in every process: the freshness view
//	                                      (staleness.View) and the public name → (server, tool) table.
//	mcpstream.v1.control.relist.<server>  request: re-list a server whose ttlMs ran out (Relister).
//	mcpstream.v1.dispatch.<server>        request: tools/call on a connector's session (Dispatcher),
//	                                      unless the connectors run in this process.
//	$SRV.PING|INFO|STATS.mcpstream-executor  discovery only (micro service subjects.ExecutorService,
//	                                      no endpoints), run by every executor once it serves, with or
//	                                      without a front end: its metadata (subjects.PolicyInfo) holds
//	                                      Config.Name, the digest of Config.Policy, frontEnd and workers,
//	                                      so that `mcpstream policy check` finds executors that enforce
//	                                      another policy than the catalog replicas, and
//	                                      Config.EnforcementDigest (limits, Approve, call and approval
//	                                      timeouts, MaxResultBytes), compared among executors only.
//
// # Pipeline
//
// Each call goes through these steps; the first that fails answers it, unless the call id
// was claimed before (step 9: an earlier request of it was dispatched): a resend refused
// before dispatch, or a redelivery refused now, gets the claim's answer as in step 9, never a
// refusal saying that nothing ran:
//
//  1. envelope: valid JSON, v 1, id (≤ 256 bytes), tool → bad_request; over 4 MiB → too_large.
//  2. a redelivered call with an answer recorded is done (never run twice). Resends of an id are
//     de-duplicated by the calls stream (its Duplicates window, 10 min); after that window a
//     side-effecting call still finds its claim (step 9) and gets the earlier answer again.
//     The de-duplication key is the publisher's header: a "resend" whose key is held by a
//     message on another tenant's subject is refused bad_request by the front end and
//     CallDirect (Submit: ErrCallIDTaken) instead of waiting for an answer that never comes.
//  3. the principal (the same policy.Policy search uses): Resolve → unknown_principal; then the
//     public name (subjects.PublicName of every listed tool; a name two pairs share, a 40-bit
//     hash collision, stays with the tool that holds it, as in the catalog) → not_found. The
//     principal and the policy (step 4) come before freshness: a principal who may not call a
//     tool learns nothing of its state and makes no re-list of its server.
//  4. policy on the definition held: a tool only a cacheScope private list of another
//     authorization context holds → not_found (invisible, as in the catalog; a removed tool
//     by the scope of the list it was last in, not of the list that left it out); Decide →
//     forbidden. Asked again of what step 5 leaves (a re-list), and after approval: a list
//     that became such meanwhile is not_found, also where step 5 would refuse it.
//  5. freshness (staleness.View): list_changed pending, removed or revoked → stale (with the
//     reason; a removed tool's names and hints, not its definition, are kept while the view
//     remembers it — staleness.MaxRemembered names a server, the catalog's bound —, then it is
//     not_found, as the view says unknown); server not ready → unavailable (with the reason), except in the executor's
//     first Config.ReconnectGrace, when a call to a server that is connecting or whose
//     connector stopped or fell silent waits for it (awaitReconnect: calls queued across a
//     restart); ttlMs run out → re-list, then decide again (unavailable if the re-list fails;
//     one that finds the list unchanged restarts its TTL from when the executor asked, on its
//     own clock, whatever the clock of registrysync's host says). The call then runs even if
//     the TTL ran out again (a ttlMs of 0: re-listed before every call; concurrent calls of
//     one server share one re-list) when the list held is the one the re-list published (or a
//     later snapshot) or confirmed (its fingerprint); a list of another fingerprint is
//     unavailable, whatever its listedAt.
//  6. arguments against the raw inputSchema (santhosh-tekuri/jsonschema: 2020-12 by default,
//     older drafts by $schema; $ref, $defs, oneOf, anyOf) → invalid_arguments with the JSON
//     pointer of the first failure in Error.Path and up to 5 failures in the message, sorted by
//     location (failures under a $ref at the argument that failed; never the failing values;
//     member names cut at 256 bytes, control characters escaped). A number of more than 1000
//     characters or with an exponent beyond ±1000 (the validator's exact arithmetic costs grow
//     with them, unmetered: see numbers.go) → invalid_arguments at that number.
//     A schema that cannot be used → invalid_schema, for every call of the definition: it does
//     not compile or fails its draft's whole meta-schema (what is under "definitions" too; for
//     2019-09 and 2020-12, not for a wrong type of annotation keywords alone, such as
//     "description": null or "examples" as an object, which validation ignores; the
//     message says what and where: a JSON pointer into the schema, at most 512 bytes), nests
//     more than 128 levels or holds more than 10,000 objects and booleans (true and false are
//     schemas too) or a number beyond those bounds (all checked on its bytes before
//     compiling), is part of itself
//     through $ref and same-value applicators (a $ref cycle), or a validation against it ran
//     on past the wall-clock backstop's grace (see schema.go; a validation of arguments is
//     stopped half the grace past the backstop, and refuses only its call when it had taken
//     more steps than limit.steps: the arguments' size bought the work). Arguments whose validation
//     overran the step budget (its $refs and unions multiply the work with each level the
//     arguments nest) → invalid_arguments for that call only: one caller must not disable
//     the tool for every other. Patterns are ECMA-262: Go's regexp runs those it
//     compiles, with ECMAScript's ".", "\s" and "\S" (pattern.go), regexp2 (ECMAScript mode,
//     with the u flag as ajv when the pattern allows it) the rest, and those holding "[]" or
//     "[^]" (not "[^]]", a lone "]" to ECMAScript with the u flag: Go's meaning); regexp2's
//     matches in one call are cut off after 1 s in all → invalid_arguments for that call only.
//     "format" is checked under drafts 4 to 7 only; under 2019-09, 2020-12 and without
//     $schema it is an annotation, as those drafts say. A string checked as "format": "regex"
//     (the caller's) over 1 KiB, nesting groups over 32 levels, or past 8 KiB of such strings
//     in one validation is not parsed, and refuses the call wherever it is (invalid_arguments
//     at its path, even under "not", "if" or "oneOf": see checkFormatRegex). The schema's own
//     patterns are compiled within bounds as well: over 16 KiB, or nesting groups over 32
//     levels or holding over 8 sets costly under the i flag where only regexp2 compiles the
//     pattern, or a definition's patterns over 32 KiB in all → invalid_schema naming the bound
//     (see maxSchemaPatternBytes, maxPatternFoldSets); such sets count 2 KiB each against a
//     validation's 8 KiB of "format": "regex" strings too. A pattern Go would expand into over
//     64Ki instructions (counted repetitions) is regexp2's, or not compiled (maxGoPatternInsts).
//     Checked before approval so nobody is asked to approve a call that cannot run. Decoding
//     costs ~25× the JSON's size in memory: values of 64 KiB or more (arguments here, results in
//     step 11) are decoded at most 8 MiB at a time per process, the rest waiting (decodebudget.go).
//     A validation cut off by its wall-clock backstop keeps its share of those 8 MiB until it
//     ends (it still references the decoded value), or for a minute at most (see schema.go).
//  7. approval, for tools annotated destructiveHint: true (policy.Config.ApproveDestructive), policy
//     rules' approve patterns and Config.Approve. First the call's rates of step 8 are taken →
//     rate_limited with retryAfterMs, nobody asked: an approver was told OK for calls then
//     refused rate_limited, the decision thrown away. A call that then does not run (denied,
//     approval_timeout, refused or handed back after) gives its counts back; one that may not
//     wait (approvalTimeoutMs -1) takes none. A call delivered again takes its rates after approval, in step 8: its first
//     delivery gave them back, or may still wait (see below), and a refusal stored now would be
//     the answer of a call that delivery may still run. Past Config.MaxApprovalWaits calls waiting in this
//     process (a wait holds a worker; an approved call waiting for a concurrency slot, step 8,
//     still counts, but for one delivered again that found no place free) → rate_limited (not a
//     call delivered again whose approval record holds its outcome, or whose approval timeout
//     passed: it takes that outcome, nobody asked, place or none; nor one delivered again while
//     another copy of it waits for approval, its executor's heartbeats lost, as an approval
//     without "approve" sent on its subject finds (no answer within 2 s counts as one, warned): it waits too, place or none, since a refusal
//     stored was the call's answer while that copy, approved, ran it); else an audit.decision needs_approval event, then a wait
//     on mcpstream.v1.approvals.<tenant>.<id> → denied, or approval_timeout after approvalTimeoutMs (default
//     5 min, capped at MaxApprovalTimeout; -1 = do not wait: needs_approval at once). An Approval
//     must hold "approve" (true or false): one without it is answered bad_request and decides
//     nothing; its by and reason are cut (1 KiB, 4 KiB) in the answer and audit events, and are
//     what the sender says (NATS permissions on the subject decide who may approve). The
//     needs_approval event's command quotes the id and tenant for a POSIX shell. A call whose
//     id is claimed already (step 9: approved and dispatched before, its executor died before
//     recording the result; or a resend while another request of the id runs) is not held for
//     approval again: it never runs again, and is answered from its claim.
//     The wait counts from the call's first needs_approval, over every delivery: the claims
//     bucket keeps the request's approval record (key <tenant>.<id>.approval.<seq>, seq its
//     calls stream sequence: when the wait began, and its outcome, approved, denied or expired,
//     the first one recorded). Another request of the id (a resend past the de-duplication
//     window, with any tool and arguments) has its own record: it never takes an approval
//     given to another request. Nor, for another call (another tool, other arguments or
//     another principal), does it wait while another request of the id waits (approvals
//     name the id, so one would decide both): the request whose wait holds the id's gate
//     (key <tenant>.<id>.approval.gate, taken atomically: of two at once, one) waits, and
//     the other is refused bad_request, until the holder's record holds an outcome, or
//     MaxApprovalTimeout has passed since it began (since the record's stored timestamp, on
//     the NATS server's clock as the limiter measures it, not the holder's clock), or it left
//     the calls stream
//     (approvalConflict); a resend of the same call (the same tool and principal, arguments
//     that are the same JSON value however written: sameCall, sameJSON) waits for the same
//     decision. That refusal is not the id's answer: it goes to the refused request's reply
//     subject only, never to the results stream, whose one answer of the id stays the waiting
//     request's (a request without a reply subject, Client.Submit's, is told nothing: Await
//     returns the waiting request's answer). A call
//     handed back (its executor stopping) and delivered again waits what is left (its needs_approval event says how long), or is answered
//     approval_timeout at once without asking again: what is left counts from the approval
//     record's stored timestamp on the NATS server's clock (with the offset the limiter
//     measures, see Limits across workers), never more than approvalTimeoutMs, whatever the clocks of the
//     executors involved (the record's since, read on this clock, only when no offset is known). Two deliveries waiting at once (heartbeats lost past
//     AckWait: JetStream delivered the call again) both get an approval, and only the first
//     outcome recorded counts: the other delivery takes it — denied or approval_timeout alike,
//     approved by waiting for the answer of the delivery that took it (the call's timeout,
//     RelistTimeout and AckWait past the decision, counted from the decided record's stored
//     timestamp on the NATS server's clock as above; once the call is claimed, the claim's
//     answer as in step 9, so a holder that left its claim or is gone is not waited for), then
//     going on as approved (the claim keeps a side-effecting call from running twice) — and its
//     approver is told OK only when the
//     approval was that very decision. A delivery that finds an outcome recorded (an executor
//     died after the decision) takes it, without asking again. When the record cannot be read
//     or written (logged), the delivery waits and decides alone, as if it were the only one.
//     Freshness is checked again after approval, and the definition: the record of an approved
//     call names the definition it was approved under (definitionDigest); one listed since with
//     another (schemas, hints), while the call waited or before a later delivery goes on as
//     approved, → stale (reason re-listed), nothing sent: nobody approved it.
//  8. limits → rate_limited with retryAfterMs (see below). A call approved in step 7 took its
//     rates then and takes only its concurrency slots here: a full cap is waited for (polled every
//     250 ms, up to the call's timeout; then rate_limited, also when the slot comes with none of
//     the timeout left), not refused at once, as its approver was told OK; its dispatch has what
//     is left of the timeout; the executor stopping meanwhile hands the call back, its approval
//     record marked so that the next delivery goes on as approved at once (no answer to wait for).
//     A call delivered again that goes on approved (an earlier delivery took the approval) takes
//     its rates here (rate_limited at once), then waits for its slots as its first delivery did.
//  9. a tool that is neither readOnlyHint nor idempotentHint is claimed (KV MCPSTREAM_INFLIGHT,
//     Create: atomic, kept 24 h) before dispatch; an existing claim with an answer → that answer
//     (duplicate: true); without one → outcome_unknown once the claim's holder can no longer
//     answer: past its deadline (the call's timeout plus AckWait past the claim: the claim's
//     until less its at, on the holder's clock, counted from the claim's stored timestamp on the
//     NATS server's clock, so that a holder's clock behind or ahead neither cuts the wait short
//     nor lengthens it; its until, at most that long from now, when no offset is known), or
//     known gone.
//     Until then the request waits for the holder's answer (its message kept in progress by the
//     heartbeats, so the wait costs no deliveries): a resend after the de-duplication window
//     while the first still runs, also when it is delivered again, and a redelivery of the
//     holder's own request while its first delivery may still run (its heartbeats lost past
//     AckWait). The claim names the calls stream sequence of the request that made it and the
//     id of its process's discovery service: a holder is known gone when its delivery ended
//     without storing an answer (storing it failed, a panic: it marks the claim "left"), when
//     that service has no responders ($SRV.PING.mcpstream-executor.<id>: its process exited or
//     its connection closed; a stopping executor keeps it until its calls end or StopGrace
//     cuts them), or, in its own process, when no worker there runs that request
//     any more. A
//     holder that cannot be asked (a ping timing out: a paused process, a stalled connection;
//     a claim of an earlier version) is waited for until its deadline. A claim JetStream
//     refuses to store (no room: its storage full, a bound on the bucket) → unavailable at once,
//     naming the bucket: the call is not run without one, nor delivered again to ask again.
//  10. dispatch tools/call with a timeout (timeoutMs capped at MaxCallTimeout) → timeout; result
//     over 4 MiB, or too large for its answer to fit a NATS message (the connection's max_payload,
//     the results stream's message size, or its max_bytes as last looked up, every 5 s: JetStream would
//     acknowledge a larger answer and drop it at once) → result_too_large (the call ran; not
//     retried); a connector that could not send →
//     unavailable; protocol_error and outcome_unknown as the connector reports them, their text
//     redacted (also the start of a value before a "…" where the connector cut it) and cut to
//     4 KiB; a result the connector refused for its shape (DispatchReply.Withheld) is kept in
//     the audit result event, as one that fails its outputSchema (step 11). Over NATS the connector's answer is awaited 2 s past the
//     deadline (it times the call out on its own clock): a result that came in time is the
//     answer, a protocol_error or result_too_large keeps its code, no answer is timeout. Retries
//     with backoff: a failure before sending (unavailable) for any tool, transport failures and
//     unknown outcomes for read-only or idempotent tools only (admitted as such, and still
//     listed as such at the retry: a tool re-listed as neither since is not sent again, the
//     earlier attempt's answer stands); never before the retryAfterMs of
//     the server's refusal (429), and not at all when that is over 1 s or past the deadline
//     (the answer carries it). A connector's refusal before sending (not connected, no
//     connector serving the server) in the first Config.ReconnectGrace, while the server's
//     status is ready or it is coming back (as in step 5), is retried past Config.RetryMax
//     until the grace or the deadline ends: after a crash the server's last status is the
//     dead connector's ready, and the new connector refuses calls until it is connected. So
//     too a refusal that lasts (no connector ever comes back for a ready server, a tool that
//     requires tasks on a protocol without them): in the grace it is answered when the grace
//     or the deadline ends, after an attempt about every second. A call is sent, the first
//     time as on a retry, only under the definition admitted, in a list its caller may still
//     use (an approved call waits for its concurrency slot up to its timeout): a tool listed again
//     otherwise since (its schemas or hints: the new connector's first list may be an
//     upgrade's; or private to another context) is not sent, stale, nothing sent (the earlier
//     attempt's answer stands when it may have reached the server).
//  11. a result that is not isError (to a case-sensitive reader and to encoding/json alike),
//     of a tool that declares an outputSchema, against that schema (of the definition admitted
//     in steps 3–7; the inputSchema's validator, bounds, step budget and backstop): no
//     structuredContent (by its exact name), or one that does not match (what either reader
//     takes for it) → protocol_error (the call ran; Error.Path a JSON pointer into the result),
//     the result withheld from the answer and kept in the audit result event. A result the
//     check cannot judge (an outputSchema that cannot be used, structuredContent nested over 128
//     levels or holding a number beyond the bounds of step 6, a pattern match cut off, the backstop, a failing structuredContent the connector
//     redacted) is passed on; the audit result event says why.
//     See output.go.
//
// A tool result with isError: true is status ok with the MCP result as the server sent it
// (content, structuredContent, isError, unchecked against the outputSchema): the model reads it. Protocol and transport failures are
// status failed with a code; refusals before dispatch are status refused.
//
// # Ack and retry
//
// One wrapper settles every call message: ack once the terminal answer is stored; nak with a
// delay when JetStream failed transiently (storing the answer, looking up a claim); term for a
// message that can never be answered (no call id, or a subject with no valid tenant token or with
// tokens after it, whose events go under the tenant token "~~": mcpstream.v1.audit.~~.<event>;
// the audit stream keeps it). A panic is
// recovered (answer internal, outcome_unknown once tools/call was sent, with its decision and
// result audit events, counted in Stats as a failed call; the worker goes on). Rate limits never nak (a nak counts as a
// delivery): they answer rate_limited. AckWait (30 s) only detects crashed workers: long calls
// and approval waits send progress heartbeats. A worker's pull request lost on the way (one sent
// at a reconnect to a cluster node whose JetStream has not caught up: "no responders", which
// nats.go ignores) is noticed by its missing idle heartbeats (2 s each) and sent again within 4 s. A call delivered MaxDeliver (5) times is answered
// without running again (outcome_unknown if claimed, else internal, which takes the claim
// first: a copy still waiting for approval elsewhere, approved, does not run; a claim so taken
// names the refusal, and its holder gone before storing it is answered internal, not
// outcome_unknown: nothing ran); the consumer delivers up to
// five more times, so that answer is retried when storing it fails. A call handed back while it
// waits for approval (its executor stopping) counts a delivery too: it is handed back with a
// 2 s delay, so that another executor (or this one restarted) takes it, not the stopping
// process's own workers.
//
// If a worker dies after dispatching a side-effecting call and before storing its answer, the
// redelivered call finds the claim and answers outcome_unknown: never a second execution, also
// when its tool was re-listed read-only or idempotent since (a redelivery of any tool looks
// for a claim: the annotations at dispatch decide). At once when the holder is known gone (its
// process exited or its connection closed, or its delivery ended without an answer: see step
// 9); a call delivered again while its first delivery may still run (heartbeats lost past
// AckWait, the holder still reachable or not answering its ping) waits for that delivery's
// answer until the claim's deadline, kept in progress meanwhile (no delivery is spent):
// storing outcome_unknown first would make it the call's one answer, and the first delivery's
// result would never be stored.
//
// An answer JetStream has no room for (the server's or the account's storage is full:
// subjects.OutOfStorage) is not handed back: its worker keeps it and stores it once there is
// room (storeWhenRoom), or hands the call back when the executor stops. Handed back, the call
// ran again if read-only, was answered outcome_unknown though its result was known, and once
// its deliveries ran out it was never answered.
//
// Only one answer of a call id is ever stored: the results stream takes an answer only while the
// call's results subject holds none (Nats-Expected-Last-Subject-Sequence), so a resend after
// every de-duplication window gets the stored answer, even one refused before dispatch or of a
// read-only tool that ran again.
//
// # Limits across workers
//
// Rates are sliding-window counters in the counter stream MCPSTREAM_LIMITS (AllowMsgCounter):
// each call adds 1 with a Nats-Incr header to its window's counter and reads the new total in
// the PubAck; the estimate ⌊previous×(1−elapsed fraction)⌋ + current (the previous window's
// whole calls still inside the sliding window, as if spread evenly) must stay within the limit,
// else the call subtracts its 1 and is refused with the time until the estimate allows it.
// Windows follow the NATS server's clock (the limits stream's time in its stream info, measured
// against the host's at the first call and every 30 s, from the quickest of up to 5 round trips:
// one slowed round trip put executors on one clock tens of milliseconds apart, and a call
// refused by one, retried after its retryAfterMs on another, was refused again; the host's
// clock until it could be measured): on
// their hosts' clocks, executors whose clocks disagreed by more than a window counted in
// different windows, never seeing each other's calls, each allowing the whole rate. The same
// measured offset times the waits that span executors (a claim's holder's answer, an approval
// wait handed over), from the stored timestamps of their KV entries. The
// previous window's count is read once per window and process, and again before a call is
// refused on a count read in the first second (a quarter of a shorter window) of its window:
// it may still hold the calls being refused at that window's end, their give-backs not in yet,
// and kept, they weighed as calls that ran for the whole window. A give-back stored before
// its increment's sequence (a new stream: a NATS restart emptied it) or leaving the counter
// below 0 is undone. A dispatched call counts whatever its answer. A call
// that needs approval counts in the window in which it was asked about (step 7), not the one it
// is dispatched in: approvals come at a human's pace. A
// Rate{PerSecond, Burst} allows Burst calls per Burst/PerSecond seconds, sliding, which averages
// PerSecond (up to 2×Burst within one window's span across a window boundary). Concurrency caps are
// leases in the KV bucket MCPSTREAM_SLOTS: keys scope.key.0 … n−1, read from a
// random one and the first free one taken with Create (a refusal writes nothing), renewed by
// the heartbeats, deleted at the end; each slot's own TTL (per-key TTLs, nats-server 2.11 or
// later) frees the slots of a crashed worker: the call's timeout plus SlotLease (30 s) and a
// second, from the slot's creation, so that its dispatch writes nothing more (the deadline plus
// SlotLease, written only if that does not cover it: lease.holdUntil) — the connector runs a
// call until its deadline (the timeoutMs it is sent) whatever becomes of the executor, and a
// slot freed before then let another executor's call run beside it, past the cap. The bucket's
// TTL (the longest call timeout, max(MaxCallTimeout, CallTimeout), + 2 × SlotLease + 1 s) bounds
// every slot, and alone those written without a TTL (by an older executor); a bucket without
// per-key TTLs is given them in place and its TTL raised, never lowered (an executor needing
// less leaves another's longer TTL), and read again after the raise: two executors raising it
// at once (a stream update has no compare-and-set) may leave the shorter TTL, raised again then
// (up to 5 times; an update that spans another's whole raise and read still leaves it). A TTL that cannot be raised stops the executor (ErrLimits) naming the
// bucket, both TTLs, JetStream's refusal and what to do (nats stream edit KV_MCPSTREAM_SLOTS
// --max-age, or let its NATS user send $JS.API.STREAM.UPDATE.KV_MCPSTREAM_SLOTS). When
// JetStream refuses to turn per-key TTLs on for an existing bucket (that permission missing,
// say), slots are written without TTLs of their own, as on an older server, and the warning at
// start gives the refusal. On a nats-server before 2.11 (the connected server's version, or an
// update that left allow_msg_ttl off) the bucket's TTL is SlotLease, a crashed worker's dispatched call
// is not covered (warned at start), and a bucket keeps the TTL it was created with: an
// executor renews its slots within the shorter of its SlotLease and the bucket's TTL. A slot
// written by two calls at once goes to one; the other looks at the next slot (also on a
// replicated bucket, whose conflict is error 10164).
//
// The slots bucket and the counter stream lost while the executor runs (memory storage: a NATS
// restart, or removed by hand) are declared again by the first call that finds them gone (at
// most once a second, the declaration bounded to 5 s; it waits for the slot takes in flight,
// each up to its request timeout), with the decisions of the start: slots written with
// per-key TTLs or without (a bucket declared again first by an older mcpstream, that the
// executor may not give them), renewed within the bucket's TTL, each condition warned of once
// when it begins; a declaration that fails is logged once and the calls are refused unavailable
// naming why, until one succeeds. The executor's calls in flight take their slots again before
// any new call takes one, within the same 5 s (a call whose lease is busy renewing or releasing,
// or that NATS hanging leaves out, at its next renewal), another executor's at their next
// renewal (a cap may be exceeded by those until then). A lease renews and releases only a slot that holds its own value, and
// writes nothing at its revision when it finds the bucket gone: a bucket declared again starts
// its revisions over, and a stale lease's revision may be another call's slot.
//
// # Clients
//
// Client.Call is a request/reply on mcpstream.v1.exec.<tenant>: it fails fast (ErrNoExecutor)
// when no front end runs; with Client.JS it also reads the results stream every 2 s, so an
// answer sent while its connection was away (a NATS restart) still arrives, and a request with
// neither an answer nor a stored result within Client.PubAckWait (5 s) — a core NATS message
// lost on its way, with a cluster node that died, say: nothing stored, nobody to answer — is
// published straight on the calls stream under the same Nats-Msg-Id with Mcpstream-Reply-To its
// inbox (one inbox of the answer mux for every publish), again with backoff until a PubAck (a
// Duplicate one too) says it is stored; it runs once, and the first answer for its id is taken
// (one obtained after such a resend is marked Duplicate only when the resend's PubAck said
// Duplicate, none before it lost: else it may be its own first request's; and a front end's
// unavailable, rate_limited or timeout answer after a resend is passed over unless the results
// stream holds it, or cannot be read). The reads of the results stream run beside the wait for
// the answer, which they never hold up. Without JS a lost request waits for the caller's deadline. Each such read (of
// Call, CallDirect and Await) gets 2 s, not the caller's whole wait: a JetStream API request
// that reaches a stream leader as it dies (a cluster node shut down) is never answered, and one
// read lost so held the wait until the caller's deadline. Client.CallDirect persists the request straight on the calls stream
// with Mcpstream-Reply-To set to an inbox of a per-connection answer mux, skipping the front
// end's hop (for in-process callers such as a gateway); a request made while no executor runs
// waits in the stream. Submit and Await are the fire-and-forget pair; Await waits for a results
// stream that does not exist yet (not declared yet, being recreated) as for an answer not stored
// yet. A request over MaxCallBytes, or over the connection's max_payload, is answered too_large
// by Call and CallDirect without being sent, and by Submit with a *subjects.Error too_large
// (also when the calls stream refuses it for its size, headers counted), and so is an id over
// 256 bytes as sent (bad_request; Await refuses such an id at once, and Decide answers it
// bad_request unsent: no call has it), and a tenant over subjects.MaxUserBytes or empty by every
// method (bad_request unsent: no executor serves it, and a long one's subjects could close the
// connection; Decide alone reads an Approval without a tenant as the local tenant's); a
// context already ended sends nothing; a connection closed
// under Call, CallDirect or Await ends them (within a poll, 2 s) with nats.ErrConnectionClosed,
// unless the answer had already arrived: that is returned; a Client without the NC or JS a
// method needs returns ErrClientIncomplete. Stats counts what a
// process did (calls by outcome, total call time, audit publish failures and drops); the
// binary serves them as Prometheus metrics.
//
// # State
//
// In memory per process: the registry view (rebuilt by replay at start; workers start once it
// caught up; dropped and rebuilt by replay from the stream's start, within seconds, when the
// registry stream is purged whole or deleted and created again while the process runs: calls
// of its tools are answered not_found until registrysync has published its lists again, and the
// revocations the stream held are gone with it: publish them again; while such a replay runs,
// calls wait, at admission, after a re-list of an expired list (whose snapshot's sequence is of
// the stream dropped: its wait ends with the drop) and before each dispatch attempt, until it
// reaches what the stream held when it began, then unavailable: at admission within the
// re-list's bound (Config.RelistTimeout from when the call asked for the re-list, or joined
// one under way, the re-list and the wait for its snapshot included; an approved call's wait
// for the replay before it is re-listed is of its timeout, from the approval), before a
// dispatch attempt at most the call's timeout (before a dispatch attempt, at once when the
// executor stops: a claimed call left waiting by a process gone would be answered
// outcome_unknown; at admission, waiting for the replay or for the re-list's snapshot, it is
// handed back): a view part
// way through holds a tool listed but not yet its revocation; the replay reaches it too when its
// last messages are deleted under it, once it applied the last one the stream holds), compiled schemas, the last count of closed rate windows, the offset of the NATS
// server's clock. In JetStream: the calls work queue, results (24 h), audit (7 d), claims
// (24 h), rate counters and slot leases. The
// rate counters and slot leases are in memory storage: a NATS server restarted (not clustered)
// drops them, and the first call that finds them gone declares them again, empty.
package executor
