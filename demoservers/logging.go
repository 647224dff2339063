package demoservers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// logWindow is how far back generated log entries go: a little less than one
// hour, so that since=now-1h always covers every entry.
const logWindow = 59 * time.Minute

var loggingSpec = spec{
	title:       "Application Logs",
	description: "Application logs: query recent log entries by level and time",
	instructions: "Use getLogs to fetch log entries of one level since a unix-millisecond timestamp. " +
		"Results can be large (thousands of entries with many repeated messages); " +
		"use getLogStats first to see how many entries and distinct messages there are.",
	toolsTTL:   60_000,
	toolsScope: mcp.CacheScopePublic,
	tools:      loggingTools,
}

type logEntry struct {
	Message    string `json:"message"`
	StackTrace string `json:"stackTrace"`
	Level      string `json:"level"`
	Timestamp  int64  `json:"timestamp"`
}

type logTemplate struct {
	message, stackTrace string
}

// errorTemplates are the distinct error messages; generated logs repeat them
// many times, so deduplicating by message is meaningful.
var errorTemplates = []logTemplate{
	{"NullPointerException in PaymentService.charge", "java.lang.NullPointerException: Cannot invoke \"Card.getToken()\" because \"card\" is null\n\tat com.acme.payments.PaymentService.charge(PaymentService.java:142)\n\tat com.acme.checkout.CheckoutController.submit(CheckoutController.java:88)"},
	{"Database connection pool exhausted (orders-db)", "org.postgresql.util.PSQLException: FATAL: remaining connection slots are reserved\n\tat com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:181)\n\tat com.acme.orders.OrderRepository.save(OrderRepository.java:57)"},
	{"Timeout calling inventory-service after 5000ms", "context deadline exceeded\n\tgithub.com/acme/inventory/client.(*Client).Reserve(client.go:212)\n\tgithub.com/acme/orders/service.(*Service).Place(service.go:97)"},
	{"Failed to parse webhook payload from Stripe", "json: cannot unmarshal string into Go struct field Event.data.object.amount of type int64\n\tgithub.com/acme/billing/webhook.(*Handler).ServeHTTP(handler.go:64)"},
	{"Redis READONLY You can't write against a read only replica", "redis: READONLY You can't write against a read only replica.\n\tgithub.com/acme/session/store.(*RedisStore).Save(redis.go:118)"},
	{"S3 PutObject AccessDenied for bucket acme-invoices", "operation error S3: PutObject, https response error StatusCode: 403, api error AccessDenied: Access Denied\n\tgithub.com/acme/invoices/storage.(*S3).Put(s3.go:45)"},
	{"Unhandled promise rejection: TypeError: Cannot read properties of undefined (reading 'id')", "TypeError: Cannot read properties of undefined (reading 'id')\n    at renderCart (/app/src/cart/render.js:41:23)\n    at async handler (/app/src/routes/cart.js:17:5)"},
	{"OutOfMemoryError: Java heap space in report-generator", "java.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays.copyOf(Arrays.java:3512)\n\tat com.acme.reports.CsvExporter.write(CsvExporter.java:203)"},
	{"TLS handshake error: certificate has expired (api.partner.example)", "x509: certificate has expired or is not yet valid: current time is after 2026-05-01T00:00:00Z\n\tcrypto/tls.(*Conn).verifyServerCertificate(handshake_client.go:1091)"},
	{"Deadlock detected while updating table accounts", "ERROR: deadlock detected (SQLSTATE 40P01)\n\tgithub.com/acme/ledger/repo.(*Accounts).Transfer(accounts.go:133)"},
	{"Kafka consumer group rebalance failed: member id unknown", "kafka: error while consuming orders.events/3: kafka server: The member id is not in the current generation\n\tgithub.com/acme/events/consumer.(*Group).Run(group.go:76)"},
	{"Failed to send email: SMTP 550 mailbox unavailable", "smtp: 550 5.1.1 The email account that you tried to reach does not exist\n\tgithub.com/acme/notify/mail.(*Sender).Send(sender.go:58)"},
}

var warnMessages = []string{
	"Slow query on orders-db took 2315ms",
	"Retrying request to inventory-service (attempt 2 of 3)",
	"Cache miss rate above 40% for product-catalog",
	"Deprecated API version v1 used by client mobile-ios/5.2",
	"Rate limit approaching for partner api.partner.example (90%)",
	"JWT expires in less than 5 minutes, refreshing",
	"Disk usage at 85% on volume /var/lib/postgresql",
	"Circuit breaker half-open for payments-gateway",
}

var infoMessages = []string{
	"User login succeeded",
	"Order placed",
	"Payment captured",
	"Cache warmed for product-catalog",
	"Health check OK",
	"Scheduled job nightly-report started",
	"Scheduled job nightly-report finished",
	"Feature flag new-checkout evaluated",
	"Webhook delivered to subscriber",
	"Session refreshed",
}

// logStore is an immutable, newest-first set of generated log entries.
type logStore struct {
	entries []logEntry
}

// generateLogs builds n entries deterministically from seed, with timestamps
// in (now-logWindow, now]. About 20% are errors, 30% warnings, 50% info;
// messages repeat heavily and are skewed towards the first templates.
func generateLogs(n int, seed int64, now time.Time) *logStore {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed_10c5))
	nowMs := now.UnixMilli()
	window := logWindow.Milliseconds()
	skewed := func(k int) int { return min(r.IntN(k), r.IntN(k)) }
	entries := make([]logEntry, n)
	for i := range entries {
		e := logEntry{Timestamp: nowMs - r.Int64N(window)}
		switch p := r.IntN(100); {
		case p < 20:
			t := errorTemplates[skewed(len(errorTemplates))]
			e.Level, e.Message, e.StackTrace = "error", t.message, t.stackTrace
		case p < 50:
			e.Level, e.Message = "warn", warnMessages[skewed(len(warnMessages))]
		default:
			e.Level, e.Message = "info", infoMessages[skewed(len(infoMessages))]
		}
		entries[i] = e
	}
	slices.SortStableFunc(entries, func(a, b logEntry) int { return cmp.Compare(b.Timestamp, a.Timestamp) })
	return &logStore{entries: entries}
}

// query returns the entries of level ("" = any) with timestamp >= since,
// newest first, at most limit of them (limit <= 0 = all), and the number of
// matches before the limit.
func (s *logStore) query(level string, since int64, limit int) ([]logEntry, int) {
	out := []logEntry{}
	total := 0
	for _, e := range s.entries {
		if e.Timestamp < since {
			break // newest first: everything after is older
		}
		if level != "" && e.Level != level {
			continue
		}
		total++
		if limit <= 0 || len(out) < limit {
			out = append(out, e)
		}
	}
	return out, total
}

// millis converts a since argument (a JSON number, at least 0) to unix milliseconds, saturating:
// a plain int64 conversion of a float beyond the int64 range is undefined (it gives the most
// negative value on amd64, which would match every entry). A fraction is rounded up: entries
// are at whole milliseconds, and one at T is before T+0.5 ("at or after since").
func millis(f float64) int64 {
	if f = math.Ceil(f); f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(f)
}

func distinctMessages(entries []logEntry) int {
	seen := make(map[string]struct{})
	for _, e := range entries {
		seen[e.Message] = struct{}{}
	}
	return len(seen)
}

const logEntriesSchema = `{
  "type": "object",
  "properties": {
    "entries": {
      "type": "array",
      "description": "Matching log entries, newest first.",
      "items": {
        "type": "object",
        "properties": {
          "message": {"type": "string", "description": "Log message; identical problems repeat the same message."},
          "stackTrace": {"type": "string", "description": "Stack trace for error entries; empty for warn and info."},
          "level": {"type": "string", "enum": ["error", "warn", "info"], "description": "Severity level."},
          "timestamp": {"type": "integer", "description": "When the entry was logged, unix milliseconds."}
        },
        "required": ["message", "stackTrace", "level", "timestamp"]
      }
    }
  },
  "required": ["entries"]
}`

const logStatsSchema = `{
  "type": "object",
  "properties": {
    "total": {"type": "integer", "description": "Number of entries since the given time, all levels."},
    "levels": {
      "type": "array",
      "description": "Per-level counts, in the order error, warn, info.",
      "items": {
        "type": "object",
        "properties": {
          "level": {"type": "string", "enum": ["error", "warn", "info"], "description": "Severity level."},
          "count": {"type": "integer", "description": "Number of entries of this level."},
          "distinctMessages": {"type": "integer", "description": "Number of different messages among them."}
        },
        "required": ["level", "count", "distinctMessages"]
      }
    },
    "oldestTimestamp": {"type": "integer", "description": "Oldest matching entry, unix milliseconds (0 if none)."},
    "newestTimestamp": {"type": "integer", "description": "Newest matching entry, unix milliseconds (0 if none)."}
  },
  "required": ["total", "levels", "oldestTimestamp", "newestTimestamp"]
}`

type logEntries struct {
	Entries []logEntry `json:"entries"`
}

type levelStats struct {
	Level            string `json:"level"`
	Count            int    `json:"count"`
	DistinctMessages int    `json:"distinctMessages"`
}

type logStats struct {
	Total  int          `json:"total"`
	Levels []levelStats `json:"levels"`
	Oldest int64        `json:"oldestTimestamp"`
	Newest int64        `json:"newestTimestamp"`
}

func loggingTools(opts Options) (base, extras []server.ServerTool) {
	store := generateLogs(opts.logs(), opts.Seed, time.Now())

	getLogs := mcp.NewTool("getLogs",
		mcp.WithToolTitle("Get logs"),
		mcp.WithDescription("Return application log entries of one severity level logged at or after a given time, newest first. "+
			"Each entry has message, stackTrace, level and timestamp. Expect thousands of entries with many repeated messages."),
		mcp.WithString("level", mcp.Required(), mcp.Enum("error", "warn", "info"),
			mcp.Description("Severity level to return: error, warn or info.")),
		mcp.WithNumber("since", mcp.Required(), mcp.Min(0),
			mcp.Description("Only entries logged at or after this time, in unix milliseconds (e.g. Date.now() - 3600000 for the last hour).")),
		mcp.WithInteger("limit", mcp.Min(1), mcp.Max(100000),
			mcp.Description("Maximum number of entries to return (newest first). Omit to return all matching entries.")),
		outputSchema(logEntriesSchema),
		annotate("Get logs", readOnly),
	)
	type getLogsArgs struct {
		Level string  `json:"level"`
		Since float64 `json:"since"`
		Limit int     `json:"limit"`
	}
	getLogsHandler := typed(func(_ context.Context, a getLogsArgs) (*mcp.CallToolResult, error) {
		since := millis(a.Since)
		entries, total := store.query(a.Level, since, a.Limit)
		text := fmt.Sprintf("%d %s log entries since %s (%d returned, %d distinct messages).",
			total, a.Level, time.UnixMilli(since).UTC().Format(time.RFC3339), len(entries), distinctMessages(entries))
		return mcp.NewToolResultStructured(logEntries{Entries: entries}, text), nil
	})

	getLogStats := mcp.NewTool("getLogStats",
		mcp.WithToolTitle("Log statistics"),
		mcp.WithDescription("Summarize the logs: number of entries and of distinct messages per level since a given time. "+
			"Cheap; use it before getLogs to judge how much data a query returns."),
		mcp.WithNumber("since", mcp.Min(0),
			mcp.Description("Only count entries logged at or after this time, in unix milliseconds. Omit to count everything retained (about the last hour).")),
		outputSchema(logStatsSchema),
		annotate("Log statistics", readOnly),
	)
	type statsArgs struct {
		Since float64 `json:"since"`
	}
	getLogStatsHandler := typed(func(_ context.Context, a statsArgs) (*mcp.CallToolResult, error) {
		all, _ := store.query("", millis(a.Since), 0)
		st := logStats{Total: len(all), Levels: []levelStats{}}
		if len(all) > 0 {
			st.Newest, st.Oldest = all[0].Timestamp, all[len(all)-1].Timestamp
		}
		for _, level := range []string{"error", "warn", "info"} {
			var of []logEntry
			for _, e := range all {
				if e.Level == level {
					of = append(of, e)
				}
			}
			st.Levels = append(st.Levels, levelStats{Level: level, Count: len(of), DistinctMessages: distinctMessages(of)})
		}
		text := fmt.Sprintf("%d entries: %d error, %d warn, %d info.", st.Total, st.Levels[0].Count, st.Levels[1].Count, st.Levels[2].Count)
		return mcp.NewToolResultStructured(st, text), nil
	})

	tailLogs := mcp.NewTool("tailLogs",
		mcp.WithToolTitle("Tail logs"),
		mcp.WithDescription("Return the most recent log entries, optionally of one level, newest first."),
		mcp.WithString("level", mcp.Enum("error", "warn", "info"),
			mcp.Description("Severity level to return. Omit for all levels.")),
		mcp.WithInteger("n", mcp.Min(1), mcp.Max(500), mcp.DefaultNumber(20),
			mcp.Description("Number of entries to return (1-500, default 20).")),
		outputSchema(logEntriesSchema),
		annotate("Tail logs", readOnly),
	)
	type tailArgs struct {
		Level string `json:"level"`
		N     int    `json:"n"`
	}
	tailLogsHandler := typed(func(_ context.Context, a tailArgs) (*mcp.CallToolResult, error) {
		if a.N <= 0 {
			a.N = 20
		}
		entries, _ := store.query(a.Level, 0, a.N)
		return mcp.NewToolResultStructured(logEntries{Entries: entries}, fmt.Sprintf("%d most recent log entries.", len(entries))), nil
	})

	base = []server.ServerTool{
		{Tool: getLogs, Handler: getLogsHandler},
		{Tool: getLogStats, Handler: getLogStatsHandler},
	}
	extras = []server.ServerTool{{Tool: tailLogs, Handler: tailLogsHandler}}
	return base, extras
}
