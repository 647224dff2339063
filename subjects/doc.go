// Package subjects is mcpstream's public NATS API in one place: every subject and stream name,
// built and parsed here, the versioned JSON event payloads that travel on them, and the encoding
// that makes any MCP server, tool, tenant or call name safe as a NATS subject token.
//
// # Versioning
//
// Every subject starts with "mcpstream.v1". Every payload carries "v": 1. Services read a
// request without "v" (or with 0 or null: the same to their decoders) as version 1 and refuse
// any other; registry events must say 1 (consumers skip others as malformed). A change that breaks a
// consumer gets a new version (v2 subjects and payloads) published beside the old one; additive
// fields do not. The golden files under testdata/ pin the wire form.
//
// # Subject map
//
//	stream MCPSTREAM_REGISTRY (limits, file, history kept; replay rebuilds every catalog; allow_msg_ttl)
//	  mcpstream.v1.registry.<server>.snapshot.<kind>   Snapshot: the whole list of one kind
//	  mcpstream.v1.registry.<server>.changed.<kind>    ListChanged: the server's list_changed notification
//	  mcpstream.v1.registry.<server>.confirmed.<kind>  Confirmed: re-listed unchanged (restarts its ttlMs;
//	                                                   with afterSeq, answers a ListChanged); one that
//	                                                   answers none expires (Nats-TTL: 2 × ttlMs, ≥ 1 h)
//	  mcpstream.v1.registry.<server>.status            Status: connecting | ready | unavailable | removed
//	  mcpstream.v1.registry.<server>.revoked           Revocation: tools an operator revoked
//	stream MCPSTREAM_CALLS (work queue, file; deduplicated by call id; discard new: a full
//	queue refuses a new call, never drops a stored one)
//	  mcpstream.v1.calls.<tenant>                      CallRequest, durable
//	stream MCPSTREAM_RESULTS (limits, file, 24 h)
//	  mcpstream.v1.results.<tenant>.<callID>           CallResult: the one terminal answer
//	stream MCPSTREAM_AUDIT (limits, file, 7 d)
//	  mcpstream.v1.audit.<tenant>.<event>              AuditEvent: request, decision, dispatch, result
//	core request/reply (not stored)
//	  mcpstream.v1.exec.<tenant>                       CallRequest → CallResult (persisted; the worker answers)
//	  mcpstream.v1.approvals.<tenant>.<callID>         Approval → {"ok":true} (approve or deny)
//	  mcpstream.v1.catalog.<tenant>.search | details | servers  catalog service (queue group)
//	  mcpstream.v1.control.relist.<server>             RelistRequest → RelistReply (re-list now)
//	  mcpstream.v1.dispatch.<server>                   DispatchRequest → DispatchReply (tools/call)
//	core publish (not stored)
//	  mcpstream.v1.heartbeat.<connector>               Heartbeat: a registrysync process is alive
//	micro discovery (every instance answers; metadata keys in discovery.go, PolicyInfo)
//	  $SRV.INFO.mcpstream-catalog | mcpstream-executor   role, instance and policy digest (executors:
//	                                                     and enforcement digest)
//
// <kind> is one of tools, prompts, resources. Every <...> token is encoded with [EncodeToken].
//
// Services decode request payloads with [Decode]: member names are case-sensitive, and a member
// named twice or matching a field only up to case is refused (bad_request), because readers of
// the same bytes would take it differently; [DecodeRegistry] refuses such a registry event too
// (ErrBadPayload: skipped as malformed), the members of its serverInfo included. An integer
// member takes any number whose value is an integer (1.0, 1e0: JSON does not tell them from 1),
// in requests and in registry events ([DecodeRegistry]); one that is not, or is out of the
// field's range, is refused.
package subjects
