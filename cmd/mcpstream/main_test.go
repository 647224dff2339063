package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// update rewrites the golden files under testdata/ (go test ./cmd/mcpstream -update).
var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// envTestMain makes the test binary act as the mcpstream binary: `up` starts the demo servers as
// children of os.Executable(), which inside `go test` is this test binary.
const envTestMain = "MCPSTREAM_TEST_MAIN"

func TestMain(m *testing.M) {
	// The client under test of an MCP conformance scenario (conformance_test.go).
	if call, ok := os.LookupEnv(envConformanceClient); ok {
		os.Exit(conformanceClient(os.Args[1:], call))
	}
	// A child started by a test acts as mcpstream, never as the test suite: by the environment
	// variable, or — since registrysync gives stdio children a minimal environment — by its first
	// argument, which `go test` never makes a non-flag. Without this a demo server child would run
	// the suite again and start children of its own.
	// A fuzzing worker is the test binary again, with the environment of the coordinator: it
	// is told by its flag.
	fuzzWorker := slices.ContainsFunc(os.Args[1:], func(a string) bool { return strings.HasPrefix(a, "-test.fuzzworker") })
	if !fuzzWorker && (os.Getenv(envTestMain) == "1" || len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-")) {
		ctx, stop := signalContext(os.Stderr)
		err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if _, ok := err.(exitCode); err != nil && !ok {
			fmt.Fprintln(os.Stderr, "mcpstream:", err)
		}
		os.Exit(exitStatus(err))
	}
	os.Setenv(envTestMain, "1") // inherited by the children the tests start
	// A -race child sleeps atexit_sleep_ms (1 s by default) before it exits: every test that
	// stops one waited for it. Races it reports while it runs still show.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}
