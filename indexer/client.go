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

// ErrNoCatalog is returned by a Client when no catalog replica answers (none is running).
var ErrNoCatalog = errors.New("no catalog replica answers (is an indexer running?)")

// Client calls the catalog service over NATS. API errors come back in the replies' Error field;
// the returned error is for transport failures only.
type Client struct {
	NC *nats.Conn
	// Timeout bounds one request when ctx has no deadline; 0 → 5s.
	Timeout time.Duration
}

// Search calls mcpstream.v1.catalog.<tenant>.search.
func (cl Client) Search(ctx context.Context, tenant string, req subjects.SearchRequest) (subjects.SearchReply, error) {
	var r subjects.SearchReply
	return r, cl.call(ctx, subjects.CatalogSearch(tenant), req, &r)
}

// Details calls mcpstream.v1.catalog.<tenant>.details.
func (cl Client) Details(ctx context.Context, tenant string, req subjects.DetailsRequest) (subjects.DetailsReply, error) {
	var r subjects.DetailsReply
	return r, cl.call(ctx, subjects.CatalogDetails(tenant), req, &r)
}

// Servers calls mcpstream.v1.catalog.<tenant>.servers.
func (cl Client) Servers(ctx context.Context, tenant string, req subjects.ServersRequest) (subjects.ServersReply, error) {
	var r subjects.ServersReply
	return r, cl.call(ctx, subjects.CatalogServers(tenant), req, &r)
}

func (cl Client) call(ctx context.Context, subject string, req, reply any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		t := cl.Timeout
		if t == 0 {
			t = 5 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	msg, err := cl.NC.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return ErrNoCatalog
	}
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if err := json.Unmarshal(msg.Data, reply); err != nil {
		return fmt.Errorf("%s: malformed reply: %w", subject, err)
	}
	return nil
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
