package registrysync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// maxLineBytes caps one JSON-RPC line from a stdio server. A longer line is dropped and reported
// as malformed (the registry stream could not take it anyway). While no fastCall waits for an
// answer, a line can only be for mcp-go (a list page, a handshake or probe answer, a
// notification), and child.pageBytes caps it: as an HTTP response body is (cappedTransport).
const maxLineBytes = 64 << 20

// safeEnv lists the variables a stdio child inherits from this process unless
// ServerConfig.InheritEnv is set (as the MCP SDKs do): enough to run, no credentials. That
// includes where npx and uvx, which start most stdio servers, keep their caches: the systemd
// unit (deploy/) points them at a directory it may write.
var safeEnv = []string{
	"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
	"TMPDIR", "TEMP", "TMP", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "npm_config_cache", "UV_CACHE_DIR",
	"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATHEXT", "PROCESSOR_ARCHITECTURE",
	"SYSTEMDRIVE", "SYSTEMROOT", "USERNAME", "USERPROFILE", "PROGRAMFILES", "COMSPEC",
}

// inheritedEnv is the environment a child starts from.
func inheritedEnv(all bool) []string {
	if all {
		return os.Environ()
	}
	var env []string
	for _, k := range safeEnv {
		// A value that is a shell function definition is not passed on (as the TypeScript
		// SDK does: exported functions are an injection vector).
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Grace periods when stopping a stdio child: stdin closed, then SIGTERM, then SIGKILL.
const (
	childStdinGrace = 2 * time.Second
	childTermGrace  = 3 * time.Second
	childKillGrace  = 5 * time.Second
)

// child is one stdio server process. The connector starts it itself (instead of letting
// mcp-go's stdio transport spawn it) so that it learns at once when the process exits, can stop
// the whole process group, and can see malformed output lines that the transport would skip
// silently (leaving the request to time out).
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File       // our end of the child's stdin
	in     *frameWriter   // stdin for every writer: mcp-go's transport and fastCall
	fast   fastRouter     // responses to fastCall requests, routed by forward
	stdout *os.File       // our end of the child's stdout
	stderr *os.File       // our end of the child's stderr
	fwdR   *io.PipeReader // valid JSON lines, read by the transport
	fwdW   *io.PipeWriter
	// lineBytes caps a line (maxLineBytes, less in some tests); pageBytes caps it while no
	// fastCall waits (see maxLineBytes).
	lineBytes, pageBytes int
	// The reader's: red and log for what it logs, onMalformed for lines that are not JSON or
	// too long (see startChild).
	red         redactor
	log         zerolog.Logger
	onMalformed func(sample string, tooLong bool)

	exited     chan struct{}
	readerDone chan struct{} // closed when forward stops reading stdout (EOF, closed)
	stderrDone chan struct{} // closed when drainStderr stops reading stderr (EOF, closed)
	waitErr    error         // set before exited is closed

	mu         sync.Mutex
	stderrLast string   // last non-empty stderr line, redacted and truncated
	stderrTail []string // the last stderrTold lines that tell (see telling), as stderrLast
	// stderrRecent holds the last stderr lines, whatever they say (stack frames too), as
	// stderrLast: at most stderrRecentLines of them and stderrRecentBytes in all (the last
	// line is kept whatever its length), for the warning about the child's failure.
	stderrRecent    []string
	stderrRecentLen int
	noisy           bool // plain text seen on stdout

	stopOnce sync.Once
}

// startChild starts sc's command with its environment added to ours. onMalformed is called
// (from the reader goroutine) with a short redacted sample of each output line that is not
// valid JSON, or tooLong for one longer than allowed. lineBytes caps every line (maxLineBytes
// but in tests), pageBytes the lines no fastCall waits for (see maxLineBytes).
func startChild(sc ServerConfig, red redactor, log zerolog.Logger, lineBytes, pageBytes int, onMalformed func(sample string, tooLong bool)) (*child, error) {
	cmd := exec.Command(sc.Command, sc.Args...)
	if p, ok := sc.Env["PATH"]; ok && !strings.ContainsRune(sc.Command, os.PathSeparator) && !strings.ContainsRune(sc.Command, '/') {
		// A bare command is looked up on the child's PATH when its env sets one, as the MCP
		// SDKs do (node's spawn, Python's subprocess): exec.Command looked on ours.
		cmd.Path, cmd.Err = lookPathIn(sc.Command, p)
	}
	env := inheritedEnv(sc.InheritEnv)
	keys := make([]string, 0, len(sc.Env))
	for k := range sc.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+sc.Env[k])
	}
	cmd.Env = env
	cmd.Dir = sc.Dir
	setProcessGroup(cmd)

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		if sc.Dir != "" {
			// The kernel's ENOENT for a missing working directory reads as if the command
			// were missing ("fork/exec CMD: no such file or directory").
			if fi, serr := os.Stat(sc.Dir); serr != nil {
				return nil, fmt.Errorf("start %s: working directory (cwd): %w", sc.Command, serr)
			} else if !fi.IsDir() {
				return nil, fmt.Errorf("start %s: working directory (cwd) %s: not a directory", sc.Command, sc.Dir)
			}
		}
		return nil, fmt.Errorf("start %s: %w", sc.Command, err)
	}
	// The child holds its ends now.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()

	fwdR, fwdW := io.Pipe()
	c := &child{
		cmd: cmd, stdin: inW, in: newFrameWriter(inW), stdout: outR, stderr: errR,
		fwdR: fwdR, fwdW: fwdW, lineBytes: lineBytes, pageBytes: min(pageBytes, lineBytes),
		exited: make(chan struct{}), readerDone: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	c.red, c.log, c.onMalformed = red, log, onMalformed
	go c.forward()
	go c.drainStderr(red, log)
	return c, nil
}

// Pid is the child's process id.
func (c *child) Pid() int { return c.cmd.Process.Pid }

// forward copies the child's stdout to the transport line by line, dropping (and reporting)
// lines that are not JSON; answers to fastCall requests go straight to their calls.
func (c *child) forward() {
	onMalformed := c.onMalformed
	defer func() { _ = c.fwdW.Close(); close(c.readerDone) }()
	br := bufio.NewReaderSize(c.stdout, 64<<10)
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			limit := c.lineBytes
			if c.fast.n.Load() == 0 {
				// No call waits: a call registered from now on sent its request after the
				// server began writing this line, which cannot be its answer.
				limit = c.pageBytes
			}
			if len(line)+len(frag) > limit {
				// Too long to take: discarded up to its newline. It may be the answer to a
				// waiting request: its id is at the start or at the end of the line (SDKs
				// write it before or after the result, see oversizeID), and that request ends
				// now rather than at its timeout. Anything else (a notification, a request of
				// the server's, an id that cannot be read so) fails nothing.
				head := append([]byte(nil), line[:min(len(line), idWindow)]...)
				if len(head) < idWindow {
					head = append(head, frag[:min(len(frag), idWindow-len(head))]...)
				}
				tail, ok := discardLineTail(br, append(line[max(0, len(line)-idWindow):len(line):len(line)], frag...))
				line = nil // not held for the life of the child
				if !c.tooLarge(head, tail, limit, onMalformed) {
					return
				}
				if !ok {
					return
				}
				continue
			}
			line = append(line, frag...)
			continue
		case err != nil:
			// EOF or closed: whatever is left without a newline is not a message.
			return
		}
		line = append(line, frag...)
		msg := bytes.TrimSpace(line)
		switch {
		case len(msg) == 0:
		case isBatch(msg) && json.Valid(msg):
			// A JSON-RPC batch (2025-03-26): each message as if it came alone.
			elems, err := splitBatch(msg)
			if err != nil {
				// Its answers are lost: the tools/calls waiting for those whose id can be read
				// end now (refusedBatch), and the handshake and lists in flight fail, as for
				// a line that is not JSON.
				c.refusedBatch(msg)
				onMalformed(fmt.Sprintf("JSON-RPC batch (%d bytes) refused: %v", len(msg), err), false)
				break
			}
			for _, e := range elems {
				if !c.handle(e) {
					return
				}
			}
		case !c.handle(msg):
			return
		}
		if cap(line) > keepLineBytes {
			line = nil // a large message's buffer is not held for the life of the child
		} else {
			line = line[:0]
		}
	}
}

// keepLineBytes is the largest line buffer forward keeps for the next line; a larger one (a
// big tool result or list page) is let go once its line is handled.
const keepLineBytes = 256 << 10

// handle takes one JSON-RPC message (a line, or a message of a batch) whose JSON is valid or
// not: an answer to a fastCall request goes to it, a request of the server's is answered, any
// other JSON to mcp-go's transport. False when the transport's reader is gone.
func (c *child) handle(msg []byte) bool {
	switch {
	case c.fast.route(msg):
		// The answer to a fastCall request, handed to it directly.
	case c.answerRequest(msg):
		// A request of the server's, answered here (see answerRequest).
	case json.Valid(msg):
		if id, bad := malformedAnswerLine(msg); bad != "" {
			// mcp-go's transport would drop it, and the request it answers (a list, the
			// handshake) waited for its timeout: it fails now, as on an event stream.
			c.onMalformedAnswer(id, bad)
			msg = localAnswer(id, localMalformed, bad)
		}
		if _, werr := c.fwdW.Write(append(msg, '\n')); werr != nil {
			return false
		}
	case msg[0] == '{' || msg[0] == '[':
		// A JSON-RPC message that is broken (cut short, a NaN in it): the tools/call it
		// answers, if its id can be read and one waits, ends now (brokenAnswer); otherwise its
		// answer is lost, and the handshake and lists in flight fail (onMalformed).
		if !c.brokenAnswer(msg) {
			c.onMalformed(printable(quoteSample(c.red, msg, 120)), false)
		}
	default:
		// Plain text on stdout (a banner, a log line): against the spec but harmless.
		c.noteNoise(printable(quote(c.red, msg, 200)), c.log)
	}
	return true
}

// tooLarge deals with a line longer than limit, discarded, whose first and last bytes are head
// and tail: when it is an answer whose id can be read (oversizeID), the request waiting for it
// ends with errResponseTooLarge (a fastCall at once, one of mcp-go's through a local answer
// its transport matches to the request, if one waits). False when the transport's reader is
// gone.
func (c *child) tooLarge(head, tail []byte, limit int, onMalformed func(string, bool)) bool {
	id, ok := oversizeID(head, tail)
	switch {
	case !ok:
		onMalformed(fmt.Sprintf("line longer than %d bytes, not an answer whose id could be read at its start or end; dropped", limit), true)
	case c.fast.tooLargeID(id):
	default:
		onMalformed(fmt.Sprintf("line longer than %d bytes, an answer to id %s; dropped, and the request waiting for it, if any, fails", limit, truncate(string(id), 40)), true)
		answer := localAnswer(id, localTooLarge, fmt.Sprintf("a line longer than %d bytes", limit))
		if _, err := c.fwdW.Write(append(answer, '\n')); err != nil {
			return false
		}
	}
	return true
}

// malformedAnswerLine returns the id of msg, valid JSON, and why mcp-go's stdio transport cannot
// decode it (malformedAnswer), when it is an answer (an id, no method) it would drop so; ""
// otherwise. Only a message that may hold an error member, or a jsonrpc that is not a string,
// is decoded.
func malformedAnswerLine(msg []byte) (id []byte, bad string) {
	if !mayHoldMember(msg, "error") && !jsonrpcNotString(msg) {
		return nil, ""
	}
	var m struct {
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
		JSONRPC json.RawMessage `json:"jsonrpc"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.Method) > 0 || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil, ""
	}
	return m.ID, malformedAnswer(m.JSONRPC, m.Error)
}

func (c *child) onMalformedAnswer(id []byte, bad string) {
	c.log.Warn().Str("id", truncate(string(id), 40)).Msg("server answered with what is no JSON-RPC response (an answer " + bad + "): the request fails")
}

// brokenAnswer ends the fastCall waiting for msg, a message that is not valid JSON, when msg
// is an answer whose id can be read at its start or end as that of a line too long is
// (oversizeID, on its first and last idWindow bytes) and is exactly the id of a waiting call:
// the call gets what is wrong with msg (fastResponse.malformed), redacted as onMalformed's
// sample is. It reports whether a call did; anything else (another id, none, a request or a
// notification) fails no call.
func (c *child) brokenAnswer(msg []byte) bool {
	if c.fast.n.Load() == 0 {
		return false
	}
	id, ok := oversizeID(msg[:min(len(msg), idWindow)], msg[max(0, len(msg)-idWindow):])
	if !ok {
		return false
	}
	ch := c.fast.takeID(id)
	if ch == nil {
		return false
	}
	// Where it breaks (json's syntax error names one character at most, quoted), and how it
	// begins: its start, redacted, then cut (quoteSample: a value cut in two is replaced too).
	sample := printable(quoteSample(c.red, msg, 120))
	ch <- fastResponse{malformed: brokenJSON(msg) + "; it begins " + sample}
	c.log.Warn().Str("id", string(id)).Str("sample", sample).Msg("server answered a tools/call with a line that is not valid JSON: the call fails")
	return true
}

// refusedBatch ends the fastCalls waiting for answers in msg, a JSON-RPC batch that was refused
// (valid JSON, an array): those of its first maxBatch elements whose id can be read as
// brokenAnswer reads it (oversizeID, on each element's first and last idWindow bytes), with
// errBadBatch. The work is one pass over msg and bounded per element.
func (c *child) refusedBatch(msg []byte) {
	if c.fast.n.Load() == 0 {
		return
	}
	batchElements(msg, maxBatch, func(e []byte) {
		if id, ok := oversizeID(e[:min(len(e), idWindow)], e[max(0, len(e)-idWindow):]); ok {
			if ch := c.fast.takeID(id); ch != nil {
				ch <- fastResponse{batch: true}
			}
		}
	})
}

// serverRequestWait bounds the write of the answer to a server's request: a server that does
// not read its stdin stalls no more than this (the session is lost if a frame is cut short).
const serverRequestWait = 2 * time.Second

// answerRequest answers msg, when it is a request from the server (ping, sampling, roots...),
// here on the reader's goroutine: ping with an empty result, anything else with "method not
// found" (the connector declares no client capability, as mcp-go answers without handlers). It
// reports whether msg was a request. mcp-go would answer each on a goroutine of its own, and a
// server flooding requests while not reading its stdin grew them without bound; answered here,
// a stalled stdin stalls the reader (and so the server's stdout) instead.
func (c *child) answerRequest(msg []byte) bool {
	if !mayHoldMember(msg, "method") {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method == nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return false // a notification, a response, or not a request mcp-go could answer either
	}
	answer := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}` + "\n"
	if *m.Method != string(mcp.MethodPing) {
		answer = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"method not supported by this client"}}` + "\n"
	}
	ctx, cancel := context.WithTimeout(context.Background(), serverRequestWait)
	_, _ = c.in.WriteCtx(ctx, []byte(answer))
	cancel()
	return true
}

// mayHoldMember reports whether the JSON text msg may hold an object member that encoding/json
// would match to a struct field named name (ASCII letters, lower case, without k or s: their
// Unicode folds are not looked for): one whose key is name in any case, or any key written
// with escapes. mcp-go's transports decode messages that way, so a filter that looks only for
// the exact key lets "Method" or "\u006dethod" through to them.
func mayHoldMember(msg []byte, name string) bool {
	if bytes.IndexByte(msg, '\\') >= 0 {
		return true
	}
	for i := bytes.IndexByte(msg, '"'); i >= 0 && i+len(name)+1 < len(msg); {
		key := msg[i+1:]
		if key[len(name)] == '"' && bytes.EqualFold(key[:len(name)], []byte(name)) {
			return true
		}
		j := bytes.IndexByte(key, '"')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// noteNoise logs text a server wrote on stdout, at warn level once, then at debug.
func (c *child) noteNoise(text string, log zerolog.Logger) {
	c.mu.Lock()
	first := !c.noisy
	c.noisy = true
	c.mu.Unlock()
	ev := log.Debug()
	if first {
		ev = log.Warn()
	}
	ev.Str("stdout", text).Msg("stdio server wrote text that is not JSON-RPC on stdout; ignored")
}

// discardLineTail skips to the end of the current line, returning its last idWindow bytes
// (tail holds the bytes read before); false at end of input.
func discardLineTail(br *bufio.Reader, tail []byte) ([]byte, bool) {
	keep := func(b []byte) {
		tail = append(tail, b...)
		if len(tail) > idWindow {
			tail = append(tail[:0], tail[len(tail)-idWindow:]...)
		}
	}
	keep(nil)
	for {
		frag, err := br.ReadSlice('\n')
		keep(frag)
		if err == nil {
			return tail, true
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return tail, false
		}
	}
}

// discardLine skips to the end of the current line; false at end of input.
func discardLine(br *bufio.Reader) bool {
	for {
		_, err := br.ReadSlice('\n')
		if err == nil {
			return true
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return false
		}
	}
}

// stderrKeep is how much of a stderr line longer than the reader's buffer is kept (then
// redacted and cut to size): its start, which says what went wrong.
const stderrKeep = 4 << 10

// stderrTold is how many of the last stderr lines that tell (see telling) an exit reason
// quotes, each cut to stderrToldBytes.
const (
	stderrTold      = 3
	stderrToldBytes = 200
)

// stderrRecentLines and stderrRecentBytes bound the tail of a child's stderr that the warning
// about its failure carries (every line, stack frames included, each cut as it is logged).
const (
	stderrRecentLines = 20
	stderrRecentBytes = 4 << 10
)

// telling reports whether a stderr line may say why a server ended: not a stack frame (an
// indented line, as node, Python, Java and Go write them) nor node's version trailer
// ("Node.js v20.11.1", the last line of every uncaught error).
func telling(line []byte) bool {
	if line[0] == ' ' || line[0] == '\t' {
		return false
	}
	rest, ok := bytes.CutPrefix(line, []byte("Node.js v"))
	return !ok || len(rest) == 0 || rest[0] < '0' || rest[0] > '9'
}

// drainStderr keeps the child's stderr flowing (a full pipe would block it), logging each line
// at debug level, redacted.
func (c *child) drainStderr(red redactor, log zerolog.Logger) {
	defer close(c.stderrDone)
	br := bufio.NewReaderSize(c.stderr, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A very long line: keep its start, skip the rest. The start is copied first:
			// skipping reads into the same buffer.
			// (cutMark: the start of a value the cut left is redacted as well, see redactor.String)
			line = append(append([]byte(nil), line[:min(len(line), stderrKeep)]...), cutMark...)
			if !discardLine(br) {
				err = io.EOF
			} else {
				err = nil
			}
		}
		if text := bytes.TrimSpace(line); len(text) > 0 {
			msg := printable(quote(red, text, 300))
			c.mu.Lock()
			c.stderrLast = msg
			if telling(line) {
				if len(c.stderrTail) == stderrTold {
					c.stderrTail = append(c.stderrTail[:0], c.stderrTail[1:]...)
				}
				c.stderrTail = append(c.stderrTail, truncate(msg, stderrToldBytes))
			}
			c.stderrRecent = append(c.stderrRecent, msg)
			c.stderrRecentLen += len(msg)
			for len(c.stderrRecent) > 1 && (len(c.stderrRecent) > stderrRecentLines || c.stderrRecentLen > stderrRecentBytes) {
				c.stderrRecentLen -= len(c.stderrRecent[0])
				c.stderrRecent[0] = ""
				c.stderrRecent = c.stderrRecent[1:]
			}
			c.mu.Unlock()
			log.Debug().Str("stderr", msg).Msg("stdio server")
		}
		if err != nil {
			return
		}
	}
}

// exitWait bounds the waits for what tells why a child ended: its exit after a broken pipe or
// a closed stdout (which a crash shows first), and the end of its stderr after its exit.
const exitWait = 250 * time.Millisecond

// exitReason describes how the child ended, with the last lines it wrote to stderr that tell
// (see telling; the last line if none does), joined by " | ". Call it once exited is closed: it
// waits up to exitWait for the rest of stderr (a process it started may hold the pipe open
// longer).
func (c *child) exitReason() string {
	waitChan(c.stderrDone, exitWait)
	msg := "process exited"
	if c.waitErr != nil {
		msg += ": " + c.waitErr.Error()
	}
	if tail := c.toldStderr(); tail != "" {
		msg += " (stderr: " + tail + ")"
	}
	return msg
}

// toldStderr is the last stderr lines that tell (see telling; the last line if none does),
// joined by " | ", or "" if the child wrote nothing on stderr.
func (c *child) toldStderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stderrTail) == 0 {
		return c.stderrLast
	}
	return strings.Join(c.stderrTail, " | ")
}

// recentStderr is a copy of the last stderr lines (see child.stderrRecent).
func (c *child) recentStderr() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.stderrRecent)
}

// stderrError is a stdio session's failure with what its child last wrote on stderr: the
// lines that tell, which its text quotes after err's (told, "" when err's text quotes them
// already: an exit reason), and the last lines, which the connector's warning carries.
type stderrError struct {
	err    error
	told   string
	recent []string
}

func (e *stderrError) Error() string {
	if e.told == "" {
		return e.err.Error()
	}
	return e.err.Error() + " (stderr: " + e.told + ")"
}

func (e *stderrError) Unwrap() error { return e.err }

// stderrOf returns the stderr tail err carries (a stdio child's failure), or nil.
func stderrOf(err error) []string {
	var se *stderrError
	if errors.As(err, &se) {
		return se.recent
	}
	return nil
}

// stop ends the child: close its stdin, wait, SIGTERM its process group, wait, SIGKILL. It
// returns once the process is reaped (or the last grace ran out) and every pipe is closed.
func (c *child) stop() {
	c.stopOnce.Do(func() {
		_ = c.stdin.Close()
		if !waitChan(c.exited, childStdinGrace) {
			signalGroup(c.cmd, false)
			if !waitChan(c.exited, childTermGrace) {
				signalGroup(c.cmd, true)
				waitChan(c.exited, childKillGrace)
			}
		}
		// Processes the child started may still hold the group; they go too.
		signalGroup(c.cmd, true)
		// Closing the writer unblocks a forwarder stuck writing and gives the transport's
		// reader a clean EOF (closing the reader would make mcp-go log an error).
		_ = c.fwdW.Close()
		_ = c.stdout.Close()
		_ = c.stderr.Close()
	})
}

func waitChan(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
