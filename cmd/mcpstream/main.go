package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
)

func main() {
	ctx, stop := signalContext(os.Stderr)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if _, ok := err.(exitCode); !ok {
			fmt.Fprintln(os.Stderr, "mcpstream:", err)
		}
		os.Exit(exitStatus(err))
	}
}

// exitStatus is the exit status of the process whose command returned err: 0 for nil, the
// status of an exitCode (the command already printed why), 2 for a usage error (badUsage:
// the command line is wrong, as for a bad flag), else 1.
func exitStatus(err error) int {
	var usage *badUsage
	switch code, ok := err.(exitCode); {
	case err == nil:
		return 0
	case ok:
		return int(code)
	case errors.As(err, &usage):
		return 2
	}
	return 1
}

// badUsage is an error of the command line itself, found before the command does anything: a
// missing, extra or unknown argument, or a flag's value out of its range. main prints it and
// exits with status 2, as for a bad flag.
type badUsage struct{ err error }

func (e *badUsage) Error() string { return e.err.Error() }
func (e *badUsage) Unwrap() error { return e.err }

// usageErrorf returns a badUsage error formatted as fmt.Errorf does (%w wraps).
func usageErrorf(format string, a ...any) error {
	return &badUsage{fmt.Errorf(format, a...)}
}

// stopSignals are the signals that stop a command cleanly: Ctrl-C, SIGTERM, and SIGHUP (the
// terminal that ran it closed: without it, up would die without stopping its roles, draining
// NATS or flushing the embedded server's store) unless SIGHUP is ignored (nohup), which a
// handler would undo.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// forcedExit is the exit status of a process quit by a second signal (128 + SIGINT, as a
// shell reports a process killed by Ctrl-C).
const forcedExit = 130

// signalContext returns a context that the first stop signal (stopSignals) cancels: the
// command then stops cleanly. A second SIGINT or SIGTERM while it stops quits at once with
// status 130, saying so on stderr: an operator who will not wait for in-flight calls or the
// stop timeout presses Ctrl-C again; the hooks added with onForcedExit run first (the stdio
// children are killed). A second SIGHUP does not: a terminal that closes sends it
// to the process group more than once (the kernel and the shell), and that must not undo the
// clean stop. stop releases the signals.
func signalContext(stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSignals()...)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGHUP {
					fmt.Fprintln(stderr, "mcpstream: hangup while stopping: still stopping cleanly")
					continue
				}
				fmt.Fprintf(stderr, "mcpstream: %v while stopping: quitting at once, without a clean stop\n", s)
				runForcedExitHooks()
				os.Exit(forcedExit)
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel()
		})
	}
}

// forcedExitHooks run just before a forced exit (a second signal while stopping): what must not
// outlive the process though the clean stop will not end it, such as the stdio children the
// connectors started (each in its own process group, which the terminal's Ctrl-C does not
// reach). Each must be quick and must not wait for the stop in progress.
var (
	forcedExitMu    sync.Mutex
	forcedExitNext  int
	forcedExitHooks = map[int]func(){}
)

// onForcedExit adds f to the hooks a forced exit runs; remove takes it out again.
func onForcedExit(f func()) (remove func()) {
	forcedExitMu.Lock()
	defer forcedExitMu.Unlock()
	id := forcedExitNext
	forcedExitNext++
	forcedExitHooks[id] = f
	return func() {
		forcedExitMu.Lock()
		delete(forcedExitHooks, id)
		forcedExitMu.Unlock()
	}
}

// runForcedExitHooks runs the hooks onForcedExit added and not removed.
func runForcedExitHooks() {
	forcedExitMu.Lock()
	hooks := make([]func(), 0, len(forcedExitHooks))
	for _, f := range forcedExitHooks {
		hooks = append(hooks, f)
	}
	forcedExitMu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// exitCode is an error that only carries an exit status (the command already printed why).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// command is one subcommand. Each lives in its own file and registers itself in init.
type command struct {
	name    string
	summary string // one line for `mcpstream help`
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// run runs the command args name and returns its error; a command that succeeded but whose
// output could not all be written (a full disk, say; a closed stdout is /dev/null to a Go
// program, and a broken pipe on stdout kills it by SIGPIPE) failed: a script reading
// that output must not take it for complete (some commands check their writes; this is for
// every one, call's result included).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && servesUntilStopped[args[0]] {
		// (Their output is a banner and notes: a service stopped cleanly did not fail.)
		return runCommand(ctx, args, stdout, stderr)
	}
	out := &outputWriter{w: stdout}
	err := runCommand(ctx, args, out, stderr)
	if werr := out.failed(); err == nil && werr != nil {
		return fmt.Errorf("write output: %w", werr)
	}
	return err
}

// servesUntilStopped are the commands that run a service until stopped, whose exit status says
// how the service ended, not whether their start-up lines were written.
var servesUntilStopped = map[string]bool{"up": true, "registrysync": true, "indexer": true, "executor": true, "demo-server": true}

// outputWriter is a command's stdout that remembers its first write error.
type outputWriter struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
	}
	return n, err
}

func (o *outputWriter) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			switch args[1] {
			case "help", "-h", "--help":
				usage(stdout)
				return nil
			case "version", "--version":
				io.WriteString(stdout, versionUsage)
				return nil
			}
			c, ok := commands[args[1]]
			if !ok {
				usage(stderr)
				return usageErrorf("help: %w", unknownCommand(args[1]))
			}
			// help policy check: what `policy check --help` prints. A "--" would end the flags
			// before --help, and run the command: what follows it is dropped.
			sub := args[2:]
			if i := slices.Index(sub, "--"); i >= 0 {
				sub = sub[:i]
			}
			if err := c.run(ctx, append(sub[:len(sub):len(sub)], "--help"), stdout, stderr); !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil
		}
		if len(args) == 0 {
			// No command: the usage, on stderr, and status 2 (`mcpstream help` prints it on
			// stdout, status 0).
			usage(stderr)
			return exitCode(2)
		}
		usage(stdout)
		return nil
	}
	if args[0] == "version" || args[0] == "--version" {
		if len(args) > 1 && (args[1] == "-h" || args[1] == "--help") {
			io.WriteString(stdout, versionUsage)
			return nil
		}
		if len(args) > 1 {
			io.WriteString(stderr, versionUsage)
			return usageErrorf("version: unexpected argument %q", args[1])
		}
		fmt.Fprintln(stdout, "mcpstream", version)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		return &badUsage{unknownCommand(args[0])}
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // --help printed the usage
	}
	return err
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const versionUsage = "Usage: mcpstream version\n\nPrints the version (set at build time; dev for a build from source).\n"

// unknownCommand is the error for a command name that is none, naming the one meant when the
// name is a typo of one (`serach`: search).
func unknownCommand(name string) error {
	names := []string{"help", "version"}
	for n := range commands {
		names = append(names, n)
	}
	if s := closest(name, names); s != "" {
		return fmt.Errorf("unknown command %q (did you mean %q?)", name, s)
	}
	return fmt.Errorf("unknown command %q", name)
}

// closest returns the candidate word is most likely a typo of: the one at the smallest edit
// distance (a swap of two neighbouring letters counts as one edit), at most 1 for words of up to
// 3 letters and 2 for longer ones, or a candidate word is the start of (at least 3 letters); ""
// when none is, or two are equally close.
func closest(word string, candidates []string) string {
	if len(word) > 64 {
		return "" // no command or flag name is near (and the distance costs its length squared)
	}
	word = strings.ToLower(word)
	best, bestDist, tie := "", 0, false
	for _, c := range candidates {
		d := editDistance(word, strings.ToLower(c))
		if d == 0 {
			return c
		}
		if len(word) >= 3 && strings.HasPrefix(strings.ToLower(c), word) {
			d = min(d, 1)
		}
		limit := 2
		if len([]rune(word)) <= 3 {
			limit = 1
		}
		if d > limit {
			continue
		}
		switch {
		case best == "" || d < bestDist:
			best, bestDist, tie = c, d, false
		case d == bestDist && c != best:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b: insertions, deletions,
// substitutions and transpositions of adjacent runes, each one edit.
func editDistance(a, b string) int {
	r, s := []rune(a), []rune(b)
	d := make([][]int, len(r)+1)
	for i := range d {
		d[i] = make([]int, len(s)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(r); i++ {
		for j := 1; j <= len(s); j++ {
			cost := 1
			if r[i-1] == s[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && r[i-1] == s[j-2] && r[i-2] == s[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(r)][len(s)]
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("mcpstream — host-side MCP at scale on NATS JetStream\n\nUsage: mcpstream COMMAND [flags]\n\nCommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(&b, "  %-14s %s\n", "version", "print the version")
	b.WriteString("\nRun `mcpstream COMMAND --help` for a command's flags.\n")
	b.WriteString("Client commands connect with --nats URL (default $MCPSTREAM_NATS, then nats://127.0.0.1:4222).\n")
	io.WriteString(w, b.String())
}
