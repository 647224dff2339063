package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// ServiceVersion is the micro service version of the catalog service.
const ServiceVersion = "1.0.0"

// handlerFunc answers one decoded request body with a reply and, when it failed, its error.
type handlerFunc func(ctx context.Context, tenant string, body []byte) (reply any, apiErr *subjects.Error)

// Serve answers catalog requests on NATS (queue group QueueGroup on subjects.CatalogSearchAll,
// CatalogDetailsAll and CatalogServersAll; micro service subjects.CatalogService for discovery)
// until ctx is done, then drains in-flight requests and returns nil (with NATS not connected,
// without the drain's confirmation from the server once none is left). It waits for Ready before
// joining the queue group, so a replica that is still rebuilding never takes a share of the
// load.
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
	sem := make(chan struct{}, c.cfg.workers())
	var wg sync.WaitGroup
	endpoints := []struct {
		name, subject string
		h             handlerFunc
	}{
		{"search", subjects.CatalogSearchAll, c.handleSearch},
		{"details", subjects.CatalogDetailsAll, c.handleDetails},
		{"servers", subjects.CatalogServersAll, c.handleServers},
	}
	// The micro service answers discovery ($SRV.PING|INFO|STATS.mcpstream-catalog, the
	// endpoints' subjects in its metadata, and the digest of the policy this replica enforces:
	// subjects.PolicyInfo); the endpoints themselves are plain queue subscriptions, so that
	// serve can see whether a request has others queued behind it.
	md := subjects.PolicyInfo{Role: subjects.RoleIndexer, Instance: c.cfg.Instance, PolicyDigest: c.pol.Digest()}.Metadata()
	md["replica"] = c.cfg.Replica
	for _, ep := range endpoints {
		md["endpoint."+ep.name] = ep.subject
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        subjects.CatalogService,
		Version:     ServiceVersion,
		Description: "mcpstream catalog: permission-aware search, details and servers",
		QueueGroup:  QueueGroup,
		Metadata:    md,
	})
	if err != nil {
		return fmt.Errorf("catalog service: %w", err)
	}
	var subs []*nats.Subscription
	stop := func() error {
		for _, sub := range subs {
			if err := sub.Drain(); err != nil {
				c.log.Debug().Err(err).Msg("drain catalog subscription")
			}
		}
		// A drain ends once the server confirms that nothing more comes (a flush): with NATS
		// away, not before nats.go's flush timeout (10 s), which cost a stopping process that
		// long for nothing. Nothing more can come while the connection is down: once the
		// requests already delivered are served (their replies wait for the reconnection),
		// the subscriptions are closed without the confirmation. Bounded: 5 s in all.
		for i := 0; i < 500 && anyValid(subs); i++ {
			if !nc.IsConnected() && allIdle(subs) {
				for _, sub := range subs {
					_ = sub.Unsubscribe()
				}
				c.log.Info().Msg("NATS is not connected: catalog service stopped without the server's confirmation that no request was left (none was in flight)")
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		return svc.Stop()
	}
	for _, ep := range endpoints {
		sub, err := nc.QueueSubscribe(ep.subject, QueueGroup, func(m *nats.Msg) {
			c.serve(ctx, nc, ep.name, ep.h, m, sem, &wg)
		})
		if err != nil {
			stop()
			return fmt.Errorf("catalog endpoint %s: %w", ep.name, err)
		}
		subs = append(subs, sub)
	}
	c.log.Info().Str("queue", QueueGroup).Str("instance", c.cfg.Instance).Str("policy", c.pol.Digest()).Msg("catalog service serving")
	<-ctx.Done()
	if err := stop(); err != nil {
		return fmt.Errorf("stop catalog service: %w", err)
	}
	return nil
}

// anyValid reports whether one of subs is still open (not yet drained or unsubscribed).
func anyValid(subs []*nats.Subscription) bool {
	for _, sub := range subs {
		if sub.IsValid() {
			return true
		}
	}
	return false
}

// allIdle reports whether none of subs holds a request, queued or being served on its
// goroutine (Pending counts a message until its callback returns).
func allIdle(subs []*nats.Subscription) bool {
	for _, sub := range subs {
		if n, _, err := sub.Pending(); err == nil && n > 0 {
			return false
		}
	}
	return true
}

// serve is the one place that turns a request into a reply: bounded concurrency, size limit,
// panic recovery, and the reply (with the error code in micro's error headers as well).
//
// A request with nothing queued behind it on its subscription is served right here, on the
// goroutine that received it: handing it to another goroutine cost about 45 µs a request here
// (indexer BenchmarkSearch, nats against bare-search). With a backlog, each request gets its
// own goroutine, at most Workers at once; so does every search and details request of a hybrid
// replica.
func (c *Catalog) serve(ctx context.Context, nc *nats.Conn, name string, h handlerFunc, m *nats.Msg, sem chan struct{}, wg *sync.WaitGroup) {
	if m.Reply != "" && !subjects.Answerable(m.Reply) {
		// The reply would be this replica's write to one of mcpstream's subjects or the
		// server's (another tenant's calls, a KV bucket): not served.
		c.log.Warn().Str("subject", m.Subject).Str("reply", headerSafe(m.Reply)).
			Msg("catalog request dropped: its reply subject is not an inbox but one of mcpstream's or the NATS server's own subjects")
		return
	}
	sem <- struct{}{}
	wg.Add(1)
	// Pending counts the message being delivered until its callback returns. A hybrid search
	// may wait for the embeddings endpoint (up to EmbedTimeout), and so may details naming a
	// tool nobody lists (its suggestions search for the name): served here, it would hold
	// every request that comes meanwhile on this subscription, with workers free.
	mayWait := (name == "search" || name == "details") && c.cfg.Embedder != nil
	if n, _, err := m.Sub.Pending(); err == nil && n <= 1 && !mayWait {
		defer func() { <-sem; wg.Done() }()
		c.respond(ctx, nc, name, h, m)
		return
	}
	go func() {
		defer func() { <-sem; wg.Done() }()
		c.respond(ctx, nc, name, h, m)
	}()
}

// replyHeaderRoom is the part of a NATS message kept for the reply's headers (micro's error
// headers hold at most a 256-byte description and a code).
const replyHeaderRoom = 1 << 10

// replyRoomKey is the context key of the room a reply has (see withReplyRoom).
type replyRoomKey struct{}

// withReplyRoom gives a request's handler the most bytes its reply may take: a servers page ends
// before it, and a details or full search answer stops reading definitions past it. It is read
// from the connection for each reply (nc.MaxPayload: the max_payload of the server the
// connection is on now, which a reconnect to another server may change), not once when serving
// starts.
func withReplyRoom(ctx context.Context, room int64) context.Context {
	return context.WithValue(ctx, replyRoomKey{}, room)
}

// replyRoom is the room of ctx's reply (withReplyRoom); 0 (no bound) for a call made in
// process, not through Serve.
func replyRoom(ctx context.Context) int64 {
	room, _ := ctx.Value(replyRoomKey{}).(int64)
	return room
}

// respond answers one request on m.Reply.
func (c *Catalog) respond(ctx context.Context, nc *nats.Conn, name string, h handlerFunc, m *nats.Msg) {
	t0 := time.Now()
	// One reading of the connection's max_payload (a read-locked field of nats.Conn) for the
	// handler's room and the final check, so that both agree.
	room := max(nc.MaxPayload()-replyHeaderRoom, 0)
	if room > 0 {
		ctx = withReplyRoom(ctx, room)
	}
	reply, apiErr := c.serveOne(ctx, name, h, m.Subject, m.Data)
	body, err := json.Marshal(reply)
	if err != nil {
		apiErr = apiError(subjects.CodeInternal, "marshal reply: %v", err)
		body, _ = json.Marshal(errorReply(name, apiErr))
	}
	if room > 0 && int64(len(body)) > room {
		// NATS would refuse to publish it (max_payload), and the client would wait for its
		// timeout as if no replica ran: say why at once instead.
		apiErr = tooLargeReply(len(body), room)
		body, _ = json.Marshal(errorReply(name, apiErr))
	}
	// Counted before the reply goes out: a client that got it finds it counted.
	if ec := c.served[name]; ec != nil {
		ec.nanos.Add(int64(time.Since(t0)))
		ec.requests.Add(1)
		if apiErr != nil {
			ec.errors.Add(1)
		}
	}
	if m.Reply == "" {
		return
	}
	err = publishReply(nc, m.Reply, body, apiErr)
	if errors.Is(err, nats.ErrMaxPayload) {
		// The connection moved to a server with a smaller max_payload since room was read:
		// the reply is refused as it would have been had it come a moment later.
		if mp := nc.MaxPayload(); mp > replyHeaderRoom && int64(len(body)) > mp-replyHeaderRoom {
			apiErr = tooLargeReply(len(body), mp-replyHeaderRoom)
			if ec := c.served[name]; ec != nil {
				ec.errors.Add(1)
			}
			body, _ = json.Marshal(errorReply(name, apiErr))
			err = publishReply(nc, m.Reply, body, apiErr)
		}
	}
	if err != nil {
		c.log.Debug().Err(err).Str("endpoint", name).Msg("reply not sent")
	}
}

// tooLargeReply is the error of a reply of n bytes larger than the room of a NATS message.
func tooLargeReply(n int, room int64) *subjects.Error {
	return apiError(subjects.CodeTooLarge, "reply of %d bytes exceeds the %d bytes a NATS message may hold: ask for fewer names, a lower k, a lower detail or a lower limit",
		n, room)
}

// publishReply sends a reply, with apiErr's code in micro's error headers.
func publishReply(nc *nats.Conn, subject string, body []byte, apiErr *subjects.Error) error {
	msg := &nats.Msg{Subject: subject, Data: body}
	if apiErr != nil {
		msg.Header = nats.Header{}
		msg.Header.Set(micro.ErrorHeader, headerSafe(apiErr.Message))
		msg.Header.Set(micro.ErrorCodeHeader, apiErr.Code)
	}
	return nc.PublishMsg(msg)
}

func (c *Catalog) serveOne(ctx context.Context, name string, h handlerFunc, subject string, body []byte) (reply any, apiErr *subjects.Error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Str("endpoint", name).Interface("panic", r).Msg("catalog handler panicked")
			apiErr = apiError(subjects.CodeInternal, "internal error")
			reply = errorReply(name, apiErr)
		}
	}()
	if len(body) > MaxRequestBytes {
		apiErr = apiError(subjects.CodeTooLarge, "request of %d bytes exceeds %d", len(body), MaxRequestBytes)
		return errorReply(name, apiErr), apiErr
	}
	tenant, err := subjects.TenantOf(subject)
	if err != nil {
		// (Why, with the subject quoted and cut: it may be 4 KiB long.)
		apiErr = subjects.TenantRefusal(subject)
		return errorReply(name, apiErr), apiErr
	}
	return h(ctx, tenant, body)
}

// pinTenant makes the subject's tenant the principal's: a principal naming another tenant, or a
// configured user of another tenant, is refused, so NATS permissions on the subjects decide
// which tenant's catalog a client sees.
func (c *Catalog) pinTenant(tenant string, pr *subjects.Principal) *subjects.Error {
	if bad := pr.Check(); bad != nil {
		return bad
	}
	if pr.Tenant != "" && pr.Tenant != tenant {
		return apiError(subjects.CodeBadRequest, "principal.tenant %q differs from the tenant of the subject (%q): the subject decides", pr.Tenant, tenant)
	}
	pr.Tenant = tenant
	rp, err := c.pol.Resolve(*pr)
	if err != nil {
		return apiError(subjects.CodeUnknownPrincipal, "%v", err)
	}
	if rp.Tenant != tenant {
		// Which tenant the user belongs to is not said, nor that it is one (see the
		// executor's admit).
		return apiError(subjects.CodeUnknownPrincipal, "%v", policy.NotInTenant(rp.User, tenant))
	}
	return nil
}

// errorReply is the reply of endpoint name ("search", "details", "servers") to a request that
// could not be decoded or served: the endpoint's reply, its list empty, as the endpoint's other
// error replies (README: `{"v":1,"tools":[],"error":{...}}`, `"servers":[]` for servers; only a
// details not_found holds the tools found).
func errorReply(name string, e *subjects.Error) any {
	switch name {
	case "servers":
		return subjects.ServersReply{V: subjects.Version, Servers: []subjects.ServerSummary{}, Error: e}
	case "details":
		return subjects.DetailsReply{V: subjects.Version, Tools: []subjects.ToolInfo{}, Error: e}
	default:
		return subjects.SearchReply{V: subjects.Version, Tools: []subjects.ToolInfo{}, Error: e}
	}
}

func decode(body []byte, v any) *subjects.Error {
	if err := subjects.Decode(body, v); err != nil {
		return apiError(subjects.CodeBadRequest, "malformed request: %v", err)
	}
	return nil
}

func (c *Catalog) handleSearch(ctx context.Context, tenant string, body []byte) (any, *subjects.Error) {
	var req subjects.SearchRequest
	if e := decode(body, &req); e != nil {
		return errorReply("search", e), e
	}
	if e := c.pinTenant(tenant, &req.Principal); e != nil {
		return errorReply("search", e), e
	}
	r := c.Search(ctx, req)
	return r, r.Error
}

func (c *Catalog) handleDetails(ctx context.Context, tenant string, body []byte) (any, *subjects.Error) {
	var req subjects.DetailsRequest
	if e := decode(body, &req); e != nil {
		return errorReply("details", e), e
	}
	if e := c.pinTenant(tenant, &req.Principal); e != nil {
		return errorReply("details", e), e
	}
	r := c.Details(ctx, req)
	return r, r.Error
}

func (c *Catalog) handleServers(ctx context.Context, tenant string, body []byte) (any, *subjects.Error) {
	var req subjects.ServersRequest
	if len(body) > 0 {
		if e := decode(body, &req); e != nil {
			return errorReply("servers", e), e
		}
	}
	if e := c.pinTenant(tenant, &req.Principal); e != nil {
		return errorReply("servers", e), e
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
