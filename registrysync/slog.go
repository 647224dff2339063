package registrysync

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	esc "github.com/mcpstream/mcpstream/printable"
)

// newSlog returns a slog.Logger for mcp-go's transports that writes to the connector's zerolog
// logger, redacted, at debug level (warn for slog errors, once per message of a session):
// transport chatter is not the operator's first concern, connector status events are.
func newSlog(log zerolog.Logger, red redactor) *slog.Logger {
	return slog.New(&slogHandler{log: log, red: red, warned: &warned{seen: map[string]bool{}}})
}

type slogHandler struct {
	log    zerolog.Logger
	red    redactor
	attrs  []slog.Attr
	group  string
	warned *warned
}

// maxWarned bounds the messages warned remembers; past it, every error goes to debug.
const maxWarned = 64

// warned remembers the messages of the errors logged at warn level. mcp-go logs an error for
// each message it cannot handle (a notification whose params are not an object, an SSE message
// that is not JSON...): a server that floods them would have had the connector write a warning
// line for each. The first of each kind is a warning, the rest debug, as for a stdio server's
// noise (child.noteNoise).
type warned struct {
	mu   sync.Mutex
	seen map[string]bool // mcp-go's messages, constant texts (the details are attributes)
}

// first reports whether msg is logged at warn level for the first time.
func (w *warned) first(msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[msg] || len(w.seen) >= maxWarned {
		return false
	}
	w.seen[msg] = true
	return true
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	if l >= slog.LevelError {
		return h.log.GetLevel() <= zerolog.WarnLevel
	}
	return h.log.GetLevel() <= zerolog.DebugLevel
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", h.group+a.Key, a.Value.Any())
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	ev := h.log.Debug()
	if r.Level >= slog.LevelError && h.warned.first(r.Message) {
		ev = h.log.Warn()
	}
	// The server's text is in it (an HTTP error's body, a URL): escaped, since the text log
	// format writes an event's message as it is, where a line end would forge log lines and an
	// escape sequence act on the operator's terminal (fields are quoted by the writer).
	ev.Str("source", "mcp-go").Msg(esc.Escape(quote(h.red, b.String(), 1000)))
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &n
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	n := *h
	n.group = h.group + name + "."
	return &n
}
