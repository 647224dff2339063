package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/subjects"
)

// ServiceVersion is the micro service version of the catalog service.
const ServiceVersion = "1.0.0"

// handlerFunc answers one decoded request body with a reply and, when it failed, its error.
type handlerFunc func(ctx context.Context, tenant string, body []byte) (reply any, apiErr *subjects.Error)

// Serve answers catalog requests on NATS (micro service subjects.CatalogService, queue group
// QueueGroup) until ctx is done, then drains in-flight requests and returns nil. It waits for
// Ready before joining the queue group, so a replica that is still rebuilding never takes a
// share of the load.
func (c *Catalog) Serve(ctx context.Context, nc *nats.Conn) error {
	tick := time.NewTicker(10 * time.Millisecond)
	for !c.Ready() {
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil
		case <-tick.C:
		}
	}
	tick.Stop()
	workers := c.cfg.Workers
	if workers <= 0 {
		workers = 2 * runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	svc, err := micro.AddService(nc, micro.Config{
		Name:        subjects.CatalogService,
		Version:     ServiceVersion,
		Description: "mcpstream catalog: permission-aware search, details and servers",
		QueueGroup:  QueueGroup,
		Metadata:    map[string]string{"replica": c.cfg.Replica},
	})
	if err != nil {
		return fmt.Errorf("catalog service: %w", err)
	}
	endpoints := []struct {
		name, subject string
		h             handlerFunc
	}{
		{"search", subjects.CatalogSearchAll, c.handleSearch},
		{"details", subjects.CatalogDetailsAll, c.handleDetails},
		{"servers", subjects.CatalogServersAll, c.handleServers},
	}
	for _, ep := range endpoints {
		if err := svc.AddEndpoint(ep.name, c.wrap(ctx, nc, ep.name, ep.h, sem, &wg), micro.WithEndpointSubject(ep.subject)); err != nil {
			svc.Stop()
			return fmt.Errorf("catalog endpoint %s: %w", ep.name, err)
		}
	}
	c.log.Info().Str("queue", QueueGroup).Msg("catalog service serving")
	<-ctx.Done()
	err = svc.Stop()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("stop catalog service: %w", err)
	}
	return nil
}

// wrap is the one place that turns a handler into a micro handler: bounded concurrency, size
// limit, panic recovery, and the reply (with the error code in micro's headers as well).
//
// Requests are served on their own goroutines, so the reply is published directly on nc:
// micro reads its request's state once Handle returns, and must not race with a late
// req.Respond or req.Error. (micro's error counters therefore do not count catalog errors; the
// replies carry the codes.)
func (c *Catalog) wrap(ctx context.Context, nc *nats.Conn, name string, h handlerFunc, sem chan struct{}, wg *sync.WaitGroup) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		data, replyTo, subject := req.Data(), req.Reply(), req.Subject()
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			reply, apiErr := c.serveOne(ctx, name, h, subject, data)
			body, err := json.Marshal(reply)
			if err != nil {
				apiErr = apiError(subjects.CodeInternal, "marshal reply: %v", err)
				body, _ = json.Marshal(struct {
					V     int             `json:"v"`
					Error *subjects.Error `json:"error"`
				}{subjects.Version, apiErr})
			}
			if replyTo == "" {
				return
			}
			msg := &nats.Msg{Subject: replyTo, Data: body}
			if apiErr != nil {
				msg.Header = nats.Header{}
				msg.Header.Set(micro.ErrorHeader, headerSafe(apiErr.Message))
				msg.Header.Set(micro.ErrorCodeHeader, apiErr.Code)
			}
			if err := nc.PublishMsg(msg); err != nil {
				c.log.Debug().Err(err).Str("endpoint", name).Msg("reply not sent")
			}
		}()
	})
}

func (c *Catalog) serveOne(ctx context.Context, name string, h handlerFunc, subject string, body []byte) (reply any, apiErr *subjects.Error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Str("endpoint", name).Interface("panic", r).Msg("catalog handler panicked")
			apiErr = apiError(subjects.CodeInternal, "internal error")
			reply = errorReply(apiErr)
		}
	}()
	if len(body) > MaxRequestBytes {
		apiErr = apiError(subjects.CodeTooLarge, "request of %d bytes exceeds %d", len(body), MaxRequestBytes)
		return errorReply(apiErr), apiErr
	}
	tenant, err := subjects.TenantOf(subject)
	if err != nil {
		apiErr = apiError(subjects.CodeBadRequest, "bad tenant token in subject %s", subject)
		return errorReply(apiErr), apiErr
	}
	return h(ctx, tenant, body)
}

// pinTenant makes the subject's tenant the principal's: a principal naming another tenant, or a
// configured user of another tenant, is refused, so NATS permissions on the subjects decide
// which tenant's catalog a client sees.
func (c *Catalog) pinTenant(tenant string, pr *subjects.Principal) *subjects.Error {
	if pr.Tenant != "" && pr.Tenant != tenant {
		return apiError(subjects.CodeBadRequest, "principal.tenant %q differs from the tenant of the subject (%q): the subject decides", pr.Tenant, tenant)
	}
	pr.Tenant = tenant
	rp, err := c.pol.Resolve(*pr)
	if err != nil {
		return apiError(subjects.CodeUnknownPrincipal, "%v", err)
	}
	if rp.Tenant != tenant {
		return apiError(subjects.CodeUnknownPrincipal, "user %q belongs to tenant %q: send the request on %s", rp.User, rp.Tenant, subjects.CatalogSearch(rp.Tenant))
	}
	return nil
}

// errorReply is the reply of a request that could not be decoded or served.
func errorReply(e *subjects.Error) any {
	return struct {
		V     int             `json:"v"`
		Error *subjects.Error `json:"error"`
	}{subjects.Version, e}
}

func decode(body []byte, v any) *subjects.Error {
	if err := json.Unmarshal(body, v); err != nil {
		return apiError(subjects.CodeBadRequest, "malformed request: %v", err)
	}
	return nil
}

func (c *Catalog) handleSearch(ctx context.Context, tenant string, body []byte) (any, *subjects.Error) {
	var req subjects.SearchRequest
	if e := decode(body, &req); e != nil {
		return subjects.SearchReply{V: subjects.Version, Tools: []subjects.ToolInfo{}, Error: e}, e
	}
	if e := c.pinTenant(tenant, &req.Principal); e != nil {
		return subjects.SearchReply{V: subjects.Version, Tools: []subjects.ToolInfo{}, Error: e}, e
	}
	r := c.Search(ctx, req)
	return r, r.Error
}

func (c *Catalog) handleDetails(ctx context.Context, tenant string, body []byte) (any, *subjects.Error) {
	var req subjects.DetailsRequest
	if e := decode(body, &req); e != nil {
		return subjects.DetailsReply{V: subjects.Version, Tools: []subjects.ToolInfo{}, Error: e}, e
	}
	if e := c.pinTenant(tenant, &req.Principal); e != nil {
		return subjects.DetailsReply{V: subjects.Version, Tools: []subjects.ToolInfo{}, Error: e}, e
	}
	r := c.Details(ctx, req)
	return r, r.Error
}

func (c *Catalog) handleServers(ctx context.Context, tenant string, body []byte) (any, *subjects.Error) {
	var req subjects.ServersRequest
	if len(body) > 0 {
		if e := decode(body, &req); e != nil {
			return subjects.ServersReply{V: subjects.Version, Servers: []subjects.ServerSummary{}, Error: e}, e
		}
	}
	if e := c.pinTenant(tenant, &req.Principal); e != nil {
		return subjects.ServersReply{V: subjects.Version, Servers: []subjects.ServerSummary{}, Error: e}, e
	}
	r := c.Servers(ctx, req)
	return r, r.Error
}

// headerSafe makes a message fit in a NATS header value (micro's error description).
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}
