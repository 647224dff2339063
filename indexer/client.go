package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// ErrNoCatalog is returned by a Client when no catalog replica answers (none is running: NATS
// says that nothing listens on the subject, at once, not after the Timeout).
var ErrNoCatalog = errors.New("no catalog replica answers (is an indexer running?)")

// ErrClientIncomplete is returned (wrapped) by a method of a Client without NC.
var ErrClientIncomplete = errors.New("indexer: incomplete Client: no NC")

// DefaultTimeout is Client.Timeout's default.
const DefaultTimeout = 5 * time.Second

// Client calls the catalog service over NATS: what the CLI, the gateway and Code Mode use. A
// Client is a value: one may be used by any number of goroutines at once (they share NC).
//
// API errors come back in the replies' Error field (with the endpoint's empty list), and the
// returned error is nil then; the returned error is for failures to get a reply, with the zero
// reply:
//   - ErrNoCatalog: no replica serves the subject (NATS's "no responders");
//   - nats.ErrConnectionClosed: NC is closed, or closed while the call waits for its reply;
//   - ctx's error (context.Canceled, context.DeadlineExceeded): ctx ended, or the Timeout
//     passed, before a reply came;
//   - a malformed reply: one that is not JSON, not of subjects.Version, or not the endpoint's
//     (neither its list, "tools" or "servers", nor an error: a replica before this version
//     left the list out of some error replies);
//   - ErrClientIncomplete: NC is nil.
//
// A request larger than a message of NC may be (its server's max_payload) is not sent: it is
// refused in the reply, Error.Code too_large, as the service refuses one over its own limit
// (MaxRequestBytes). A call made while NC is reconnecting is sent once it is connected again,
// as nats.go sends what is published meanwhile, and waits for its reply within its bound.
type Client struct {
	NC *nats.Conn
	// Timeout bounds one request when ctx has no deadline (ctx's deadline, when it has one,
	// is the bound instead, longer or not); 0 or negative → DefaultTimeout.
	Timeout time.Duration
}

// Search calls mcpstream.v1.catalog.<tenant>.search.
func (cl Client) Search(ctx context.Context, tenant string, req subjects.SearchRequest) (subjects.SearchReply, error) {
	return clientCall(ctx, cl, "search", tenant, subjects.CatalogSearch, req, func(r subjects.SearchReply) bool {
		return r.V == subjects.Version && (r.Tools != nil || r.Error != nil)
	})
}

// Details calls mcpstream.v1.catalog.<tenant>.details.
func (cl Client) Details(ctx context.Context, tenant string, req subjects.DetailsRequest) (subjects.DetailsReply, error) {
	return clientCall(ctx, cl, "details", tenant, subjects.CatalogDetails, req, func(r subjects.DetailsReply) bool {
		return r.V == subjects.Version && (r.Tools != nil || r.Error != nil)
	})
}

// Servers calls mcpstream.v1.catalog.<tenant>.servers.
func (cl Client) Servers(ctx context.Context, tenant string, req subjects.ServersRequest) (subjects.ServersReply, error) {
	return clientCall(ctx, cl, "servers", tenant, subjects.CatalogServers, req, func(r subjects.ServersReply) bool {
		return r.V == subjects.Version && (r.Servers != nil || r.Error != nil)
	})
}

// clientCall sends req to endpoint name's subject of tenant (built by subjectOf), and returns
// its reply R when ok says it is one (see Client). A tenant no replica serves (over
// subjects.MaxUserBytes, or empty: subjects.CheckTenant) is answered bad_request unsent, as the
// replicas answer it: a long one's subject could be past the NATS server's max_control_line,
// which closes the connection that sends it.
func clientCall[R any](ctx context.Context, cl Client, name, tenant string, subjectOf func(string) string, req any, ok func(R) bool) (R, error) {
	var zero, r R
	subject := subjectOf(tenant)
	if subjects.CheckTenant(tenant) != nil {
		// (In the words of the replicas' refusal of it.)
		return errorReply(name, subjects.TenantRefusal(subject)).(R), nil
	}
	if cl.NC == nil {
		return zero, fmt.Errorf("%w (%s)", ErrClientIncomplete, subject)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return zero, fmt.Errorf("encode request: %w", err)
	}
	tooLarge := func(limit int64) (R, error) {
		e := apiError(subjects.CodeTooLarge, "request of %d bytes exceeds the %d bytes a NATS message may hold (the connection's max_payload)", len(body), limit)
		return errorReply(name, e).(R), nil
	}
	if limit := cl.NC.MaxPayload(); limit > 0 && int64(len(body)) > limit {
		return tooLarge(limit)
	}
	if _, ok := ctx.Deadline(); !ok {
		t := cl.Timeout
		if t <= 0 {
			t = DefaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	msg, err := cl.NC.RequestWithContext(ctx, subject, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return zero, ErrNoCatalog
	case errors.Is(err, nats.ErrMaxPayload):
		// (A reconnection to a server with a smaller max_payload since the check above.)
		return tooLarge(cl.NC.MaxPayload())
	case err != nil:
		return zero, fmt.Errorf("%s: %w", subject, err)
	}
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return zero, fmt.Errorf("%s: malformed reply: %w", subject, err)
	}
	if !ok(r) {
		return zero, fmt.Errorf("%s: malformed reply: not a version %d %s reply: %.200q", subject, subjects.Version, name, msg.Data)
	}
	return r, nil
}

// MaxServerPages bounds the pages AllServers follows when its caller gives no bound.
const MaxServerPages = 10_000

// AllServers follows the pages of the servers listing from req.After (req.Limit servers a page)
// and returns every server, in order: at most maxPages pages (0 → MaxServerPages), after which
// the reply's Next says where the rest starts. An API error of a page ends it: the reply holds
// the servers before it and the error. A service that answers a Next that does not sort after
// the page's After (it would page forever) is an error.
func (cl Client) AllServers(ctx context.Context, tenant string, req subjects.ServersRequest, maxPages int) (subjects.ServersReply, error) {
	out := subjects.ServersReply{V: subjects.Version, Servers: []subjects.ServerSummary{}}
	if maxPages <= 0 {
		maxPages = MaxServerPages
	}
	for range maxPages {
		rep, err := cl.Servers(ctx, tenant, req)
		if err != nil {
			return out, err
		}
		if rep.Error != nil {
			out.Error = rep.Error
			return out, nil
		}
		out.Servers = append(out.Servers, rep.Servers...)
		if rep.Next == "" {
			return out, nil
		}
		if rep.Next <= req.After {
			return out, fmt.Errorf("%s: next %q does not sort after %q", subjects.CatalogServers(tenant), rep.Next, req.After)
		}
		req.After = rep.Next
	}
	out.Next = req.After
	return out, nil
}
