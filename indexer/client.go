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
