package registrysync

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/rs/zerolog"
)

// newSlog returns a slog.Logger for mcp-go's transports that writes to the connector's zerolog
// logger, redacted, at debug level (warn for slog errors): transport chatter is not the
// operator's first concern, connector status events are.
func newSlog(log zerolog.Logger, red redactor) *slog.Logger {
	return slog.New(&slogHandler{log: log, red: red})
}

type slogHandler struct {
	log   zerolog.Logger
	red   redactor
	attrs []slog.Attr
	group string
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
	if r.Level >= slog.LevelError {
		ev = h.log.Warn()
	}
	ev.Str("source", "mcp-go").Msg(truncate(h.red.String(b.String()), 1000))
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
