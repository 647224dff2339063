package demoservers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ErrUnknownServer is returned (wrapped) when a server name is not one of Names().
var ErrUnknownServer = errors.New("unknown demo server")

// Version is the server version every demo server reports.
const Version = "1.0.0"

// MaxLogs bounds Options.Logs: the logging server generates every entry at start (about 100
// bytes each, with the sorting), so a huge count would run out of memory.
const MaxLogs = 1_000_000

const (
	defaultLogs            = 5000
	defaultControlInterval = 200 * time.Millisecond
)

// Options configures a demo server. Zero values mean defaults.
type Options struct {
	// ControlFile, when set, names a JSON file {"hide": [...], "add": [...]}
	// that changes the advertised tools at run time (see the package doc).
	// A missing file means the default tool set.
	ControlFile string
	// Logs is the number of generated log entries of the logging server
	// (default 5000, at most MaxLogs: more is an error).
	Logs int
	// Seed drives the deterministic log generation of the logging server.
	Seed int64
	// ControlInterval is how often ControlFile is polled (default 200ms).
	ControlInterval time.Duration
	// ErrorLog receives diagnostics (malformed control file, transport
	// errors). Nil means os.Stderr. Nothing is ever written to a stdio
	// server's output stream except protocol messages.
	ErrorLog io.Writer
}

func (o Options) logs() int {
	if o.Logs <= 0 {
		return defaultLogs
	}
	return o.Logs
}

func (o Options) controlInterval() time.Duration {
	if o.ControlInterval <= 0 {
		return defaultControlInterval
	}
	return o.ControlInterval
}

func (o Options) logger(name string) *log.Logger {
	w := o.ErrorLog
	if w == nil {
		w = os.Stderr
	}
	return log.New(w, "demoservers["+name+"]: ", log.LstdFlags)
}

// spec describes one bundled server.
type spec struct {
	description  string
	instructions string
	title        string
	toolsTTL     int64
	toolsScope   mcp.CacheScope
	// tools builds the default and the optional extra tools. It is called
	// once per server instance, so state captured by handlers is per instance.
	tools func(opts Options) (base, extras []server.ServerTool)
}

var specs = map[string]spec{
	"logging":   loggingSpec,
	"ticketing": ticketingSpec,
	"kb":        kbSpec,
}

// Names returns the names of the bundled demo servers, sorted.
func Names() []string {
	names := make([]string, 0, len(specs))
	for name := range specs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ExtraTools returns the names of the optional tools of a server, sorted:
// the names a control file may "add".
func ExtraTools(name string) ([]string, error) {
	sp, ok := specs[name]
	if !ok {
		return nil, fmt.Errorf("demo server %q: %w", name, ErrUnknownServer)
	}
	_, extras := sp.tools(Options{Logs: 1})
	names := make([]string, 0, len(extras))
	for _, t := range extras {
		names = append(names, t.Tool.Name)
	}
	sort.Strings(names)
	return names, nil
}

// New builds the named demo server with its default tools. When
// opts.ControlFile is set, the file is read once and applied; it is not
// watched (use NewWatched, ServeStdio or ServeHTTP for that).
func New(name string, opts Options) (*server.MCPServer, error) {
	d, err := build(name, opts)
	if err != nil {
		return nil, err
	}
	d.pollControl()
	return d.srv, nil
}

// NewWatched is New, plus, when opts.ControlFile is set, a goroutine that
// polls the control file every opts.ControlInterval until ctx is done, adding
// and removing tools on each change (which makes mcp-go send
// notifications/tools/list_changed to connected clients).
func NewWatched(ctx context.Context, name string, opts Options) (*server.MCPServer, error) {
	d, err := build(name, opts)
	if err != nil {
		return nil, err
	}
	d.pollControl()
	if opts.ControlFile != "" {
		go d.watchControl(ctx)
	}
	return d.srv, nil
}

// demo is one running demo server: the mcp-go server plus what the control
// file can change.
type demo struct {
	name   string
	opts   Options
	srv    *server.MCPServer
	log    *log.Logger
	base   []server.ServerTool
	extras map[string]server.ServerTool

	mu      sync.Mutex
	active  map[string]bool // tool names currently registered
	lastKey string          // last control file state seen ("" = never polled)
}

func build(name string, opts Options) (*demo, error) {
	sp, ok := specs[name]
	if !ok {
		return nil, fmt.Errorf("demo server %q: %w", name, ErrUnknownServer)
	}
	if opts.Logs > MaxLogs {
		return nil, fmt.Errorf("demo server %q: Options.Logs %d is over MaxLogs (%d)", name, opts.Logs, MaxLogs)
	}
	srv := server.NewMCPServer(name, Version,
		server.WithTitle(sp.title),
		server.WithDescription(sp.description),
		server.WithInstructions(sp.instructions),
		server.WithToolCapabilities(true),
		server.WithInputSchemaValidation(),
		server.WithOutputSchemaValidation(),
		server.WithStrictInputSchemaDefault(),
		server.WithRecovery(),
		server.WithMethodCacheHints(mcp.MethodToolsList, sp.toolsTTL, sp.toolsScope),
	)
	base, extras := sp.tools(opts)
	d := &demo{
		name:   name,
		opts:   opts,
		srv:    srv,
		log:    opts.logger(name),
		base:   base,
		extras: make(map[string]server.ServerTool, len(extras)),
		active: make(map[string]bool, len(base)),
	}
	for _, t := range extras {
		d.extras[t.Tool.Name] = t
	}
	srv.AddTools(base...)
	for _, t := range base {
		d.active[t.Tool.Name] = true
	}
	return d, nil
}
