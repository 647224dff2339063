package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// mcp-go's client opens a connection with server/discover at 2026-07-28, and falls back to the
// initialize handshake (2025-11-25 and before) when that fails. Two of its decisions are wrong
// for real servers, and are corrected here, on the answer to server/discover, whatever the
// transport:
//
//   - It takes any result for a modern server, whatever the result says. A legacy server that
//     answers every method it does not know with an empty result (the conformance suite's mock
//     servers do; so do lax hand-written ones) was then sent 2026-07-28 requests and never
//     initialized. A result whose supportedVersions does not list the version asked for is
//     turned into the error such a server would send (-32022, unsupported protocol version,
//     listing the versions it named): mcp-go then asks again at a version the server listed, if
//     it knows one, or falls back to initialize — for a server that listed none, the legacy
//     server it is.
//   - A server that refuses the version asked for (-32022) while listing it as supported (a
//     deployment whose replicas are being upgraded, say) made mcp-go fall back to initialize,
//     which a 2026-07-28 server refuses: the connection failed once, after sending a legacy
//     handshake without MCP-Protocol-Version or _meta. It is asked again once, with a new id,
//     at the same version, as SEP-2575 has a client retry at a version the server listed.
//
// mcp-go also falls back to initialize when server/discover fails for a passing reason: an
// HTTP 503 or 429 (a gateway shedding load, a replica restarting), a connection that failed,
// no answer within its probe timeout (half of ConnectTimeout, at least 5 s: discoverTimeout,
// session.go). A 2026-07-28 server that also serves legacy clients (as mcp-go's does) is then
// spoken to at 2025-11-25 for that connection. The
// connector remembers a streamable HTTP server found to be legacy, so that its reconnections
// open the GET stream at once (legacyHTTP), but only when the server's answer said so (a
// JSON-RPC error, an HTTP 4xx other than 408 and 429): after a passing failure (discoverPassing)
// the next reconnection probes server/discover again. (mcp-go's fallback lasts one Client, and
// each session has a Client of its own: it was the connector's memory that made one 503
// last until the process restarted.)
//
// A server/discover refused HTTP 429 or 503 with a Retry-After (well-formed, not past) is not
// followed by initialize: the server asked not to be asked again before then. The handshake
// fails with that Retry-After (discoverWait), and the connector connects again no sooner.

// discover sends a server/discover request (see above).
func (t *base) discover(ctx context.Context, req transport.JSONRPCRequest) (resp *transport.JSONRPCResponse, err error) {
	if cp, _ := ctx.Value(captureKey{}).(*capture); cp != nil {
		defer func() { cp.noteDiscover(resp, err, ctx.Err() != nil) }()
	}
	requested := metaProtocolVersion(req.Params)
	resp, err = t.send(ctx, req)
	if err != nil || resp == nil || requested == "" {
		return resp, err
	}
	if resp.Error != nil && resp.Error.Code == mcp.UNSUPPORTED_PROTOCOL_VERSION &&
		slices.Contains(unsupportedVersionData(resp.Error).Supported, requested) {
		again := req
		again.ID = mcp.NewRequestId("mcpstream-discover-" + strconv.FormatUint(t.retries.Add(1), 10))
		resp, err = t.send(ctx, again)
		if err != nil || resp == nil {
			return resp, err
		}
		resp.ID = req.ID
	}
	if resp.Error != nil {
		return resp, nil
	}
	var result struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	_ = json.Unmarshal(resp.Result, &result) // (not an object: mcp-go fails to decode it)
	if slices.Contains(result.SupportedVersions, requested) {
		return resp, nil
	}
	supported := result.SupportedVersions
	if len(supported) > 8 {
		supported = supported[:8]
	}
	return &transport.JSONRPCResponse{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      resp.ID,
		Error: &mcp.JSONRPCErrorDetails{
			Code:    mcp.UNSUPPORTED_PROTOCOL_VERSION,
			Message: fmt.Sprintf("server/discover answered without listing protocol version %s in supportedVersions", requested),
			Data:    mcp.UnsupportedProtocolVersionData{Supported: supported, Requested: requested},
		},
	}, nil
}

// metaProtocolVersion is the protocol version in a request's _meta, "" if none.
func metaProtocolVersion(params any) string {
	b, err := json.Marshal(params)
	if err != nil {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var v string
	if json.Unmarshal(b, &p) != nil || json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v) != nil {
		return ""
	}
	return v
}

// unsupportedVersionData is the data of a -32022 error (zero if malformed).
func unsupportedVersionData(e *mcp.JSONRPCErrorDetails) mcp.UnsupportedProtocolVersionData {
	var d mcp.UnsupportedProtocolVersionData
	if b, err := json.Marshal(e.Data); err == nil {
		_ = json.Unmarshal(b, &d)
	}
	return d
}

// noteDiscover records whether the server/discover just sent (its answer resp, err) failed
// for a passing reason, one that does not tell a legacy server: no answer (a connection that
// failed, no answer before the probe's deadline, expired, even on an event stream that
// opened), or an HTTP 5xx, 408 or 429, whatever its body. A JSON-RPC error or
// another HTTP 4xx is the server's word that it does not speak 2026-07-28.
func (cp *capture) noteDiscover(resp *transport.JSONRPCResponse, err error, expired bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.discoverFailure = discoverFailure(resp, err, expired, cp.status, cp.discoverBound)
	switch status := cp.status; {
	case err == nil && (resp == nil || resp.Error == nil):
		cp.discoverPassing = false // answered (a result mcp-go cannot read is the server's word)
	case expired, status >= 500, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		cp.discoverPassing = true
	default:
		cp.discoverPassing = status == 0 && err != nil
	}
}

// discoverFailedPassing reports whether the last server/discover sent with this slot failed
// for a passing reason (noteDiscover).
func (cp *capture) discoverFailedPassing() bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.discoverPassing
}

// discoverWait is the error that stops initialize from being sent with this slot right after a
// server/discover the server refused HTTP 429 or 503 with a Retry-After (nil otherwise): the
// handshake fails, and its HTTP status and Retry-After, still in the slot, make the connector
// wait (withRetryAfter).
func (cp *capture) discoverWait(now time.Time) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.method != string(mcp.MethodServerDiscover) ||
		cp.status != http.StatusTooManyRequests && cp.status != http.StatusServiceUnavailable {
		return nil
	}
	ms := retryAfterMs(cp.retryAfter, now)
	if ms <= 0 {
		return nil
	}
	return fmt.Errorf("server/discover: the server refused it with HTTP %d (%s); Retry-After %s: initialize not sent before then",
		cp.status, http.StatusText(cp.status), time.Duration(ms)*time.Millisecond)
}

// discoverFailure says how a server/discover failed (its answer resp, err; expired: its
// deadline passed; status: the HTTP status of its POST, 0 if none; bound: the probe's
// deadline), "" if it was answered with a result.
func discoverFailure(resp *transport.JSONRPCResponse, err error, expired bool, status int, bound time.Duration) string {
	switch {
	case err == nil && (resp == nil || resp.Error == nil):
		return ""
	case resp != nil && resp.Error != nil:
		msg := fmt.Sprintf("server/discover failed with error %d: %s", resp.Error.Code, truncate(resp.Error.Message, 200))
		if d := unsupportedVersionData(resp.Error); len(d.Supported) > 0 {
			msg += fmt.Sprintf(" (supported: %s)", truncate(strings.Join(d.Supported, ", "), 200))
		}
		return msg
	case expired:
		return fmt.Sprintf("the server did not answer server/discover within %s", bound)
	case status != 0:
		return fmt.Sprintf("the server answered server/discover with HTTP %d (%s)", status, http.StatusText(status))
	default:
		return "server/discover failed: " + truncate(err.Error(), 300)
	}
}

// pinnedError is the failure of a handshake pinned to a protocol version (ServerConfig.
// ProtocolVersion) that the server did not speak.
type pinnedError struct{ msg string }

func (e *pinnedError) Error() string { return e.msg }

// pinnedRefusal is the error that stops initialize from being sent with this slot when the
// handshake is pinned to 2026-07-28 or later (nil otherwise). mcp-go falls back to initialize
// whenever server/discover fails, whatever the version asked for, and initialize negotiates
// 2025-11-25 at most: a version the pin says not to speak. The connection fails instead,
// saying why server/discover failed, and the connector tries again after its backoff (a
// server slow to start, or restarting, answers server/discover then).
func (cp *capture) pinnedRefusal() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.pin == "" || !mcp.IsModernProtocol(cp.pin) {
		return nil
	}
	why := cp.discoverFailure
	if why == "" {
		why = "server/discover failed"
	}
	return &pinnedError{msg: fmt.Sprintf("protocolVersion is pinned to %s but %s; initialize was not sent "+
		"(it negotiates %s at most): check that the server speaks %s, or unpin protocolVersion",
		cp.pin, why, mcp.LATEST_LEGACY_PROTOCOL_VERSION, cp.pin)}
}

// pinMismatch is the error of a handshake pinned to pin (ServerConfig.ProtocolVersion) that
// settled on another version, got (nil when they agree or nothing is pinned). A server answers
// initialize with the version asked for when it supports it, and with another it supports when
// it does not; mcp-go took any version it knows, so a pin to 2025-06-18 could run at
// 2025-11-25.
func pinMismatch(pin, got string) error {
	if pin == "" || got == pin {
		return nil
	}
	return &pinnedError{msg: fmt.Sprintf("protocolVersion is pinned to %s but the server answered initialize with protocol %s, "+
		"the version it speaks in its place: pin %s or unpin protocolVersion", pin, got, got)}
}
