package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unitBinary is where the units run mcpstream from (README step 2).
const unitBinary = "/usr/local/bin/mcpstream"

// unitExecStart is the ExecStart of a deploy/ unit file.
func unitExecStart(t *testing.T, file string) string {
	t.Helper()
	var execStart string
	n := 0
	for _, line := range strings.Split(readDeploy(t, file), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart, n = v, n+1
		}
	}
	if n != 1 {
		t.Fatalf("%s: %d ExecStart lines, want 1", file, n)
	}
	return execStart
}

// unitCommand is the mcpstream command line (without the binary) that systemd runs for the
// ExecStart of a unit whose instance (%i) is instance: specifiers and "$$" replaced, split into
// words as systemd splits them, and, for a /bin/sh -c script, the command line the script execs
// (run with a stand-in for the binary that prints its arguments). refused is the script's
// failure when it refuses the instance.
func unitCommand(t *testing.T, execStart, instance string) (args []string, refused error) {
	t.Helper()
	// Specifiers (systemd.unit(5)): only %i and %% are expected here.
	var b strings.Builder
	for i := 0; i < len(execStart); i++ {
		if execStart[i] != '%' {
			b.WriteByte(execStart[i])
			continue
		}
		if i+1 == len(execStart) {
			t.Fatalf("ExecStart ends with %%: %s", execStart)
		}
		switch i++; execStart[i] {
		case '%':
			b.WriteByte('%')
		case 'i', 'I':
			b.WriteString(instance)
		default:
			t.Fatalf("ExecStart has specifier %%%c, which this test does not know: %s", execStart[i], execStart)
		}
	}
	line := b.String()
	// Environment variables (systemd.service(5), Command lines): "$$" is a "$"; any other "$"
	// would be replaced by systemd from the unit's environment.
	if strings.Contains(strings.ReplaceAll(line, "$$", ""), "$") {
		t.Fatalf("ExecStart has a $ that systemd would expand (write $$ for the shell's): %s", execStart)
	}
	line = strings.ReplaceAll(line, "$$", "$")
	if strings.Contains(line, `\`) {
		t.Fatalf("ExecStart has a backslash, which this test does not unescape: %s", execStart)
	}
	// Words: separated by blanks, quoted with '…' or "…" (systemd's own rules without escapes).
	var words []string
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " \t") {
		var w strings.Builder
		for rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			if q := rest[0]; q == '\'' || q == '"' {
				end := strings.IndexByte(rest[1:], q)
				if end < 0 {
					t.Fatalf("ExecStart has an unterminated quote: %s", execStart)
				}
				w.WriteString(rest[1 : 1+end])
				rest = rest[2+end:]
				continue
			}
			w.WriteByte(rest[0])
			rest = rest[1:]
		}
		words = append(words, w.String())
	}
	if len(words) > 0 && words[0] == unitBinary {
		return words[1:], nil
	}
	if len(words) < 3 || words[0] != "/bin/sh" || words[1] != "-c" || !strings.Contains(words[2], "exec "+unitBinary+" ") {
		t.Fatalf("ExecStart runs neither %s nor a /bin/sh -c script that execs it: %q", unitBinary, words)
	}
	stand := filepath.Join(t.TempDir(), "mcpstream")
	if err := os.WriteFile(stand, []byte("#!/bin/sh\nfor a; do printf '%s\\0' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(words[2], "exec "+unitBinary+" ", "exec "+stand+" ")
	cmd := exec.Command("/bin/sh", append([]string{"-c", script}, words[3:]...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"), nil
}

// flagOf is the value of flag --name in args ("" when absent).
func flagOf(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestDeployUnitPorts: the templated units listened on 127.0.0.1:81%i0 and 82%i0: from
// instance 10 on that is no port (81100), and two instances could collide (a drop-in's 1 and
// 10). Every instance from 0 to 99 of each templated unit gets a valid loopback port of its own,
// the one deploy/README.md states, none of them registrysync's or a NATS node's; its --replica is
// its instance; and an instance outside that range does not silently share or lose a port.
func TestDeployUnitPorts(t *testing.T) {
	readme := strings.Join(strings.Fields(readDeploy(t, "README.md")), " ")
	const stated = "registrysync on 8081, indexer@N on 8100+N, executor@N on 8300+N (N from 0 to 99"
	if !strings.Contains(readme, stated) {
		t.Errorf("deploy/README.md no longer says %q; update this test with it", stated)
	}
	base := map[string]int{"mcpstream-indexer@.service": 8100, "mcpstream-executor@.service": 8300}
	taken := map[int]string{8081: "registrysync", 4222: "NATS clients", 6222: "NATS routes", 8222: "NATS monitoring"}
	for file, b := range base {
		execStart := unitExecStart(t, file)
		ports := map[int]bool{}
		for n := range 100 {
			instance := strconv.Itoa(n)
			args, refused := unitCommand(t, execStart, instance)
			if refused != nil {
				t.Errorf("%s@%s: refused: %v", file, instance, refused)
				continue
			}
			port, ok := loopbackPort(t, file, instance, flagOf(args, "http-listen"))
			if !ok {
				continue
			}
			if port != b+n {
				t.Errorf("%s@%s: port %d, README says %d", file, instance, port, b+n)
			}
			if other, dup := taken[port]; dup {
				t.Errorf("%s@%s: port %d is %s's too", file, instance, port, other)
			}
			taken[port] = file + "@" + instance
			ports[port] = true
			if r := flagOf(args, "replica"); r != instance {
				t.Errorf("%s@%s: --replica %q", file, instance, r)
			}
		}
		// Outside the range: refused, or a port of its own.
		for _, instance := range []string{"100", "6554", "01", "-1", "east-2", ""} {
			args, refused := unitCommand(t, execStart, instance)
			if refused != nil {
				continue
			}
			if port, ok := loopbackPort(t, file, instance, flagOf(args, "http-listen")); ok && ports[port] {
				t.Errorf("%s@%s: port %d, which an instance from 0 to 99 has", file, instance, port)
			}
		}
	}

	// Every unit's command line, for an instance in the range, parses with its subcommand's flags.
	for _, file := range []string{"mcpstream-registrysync.service", "mcpstream-indexer@.service", "mcpstream-executor@.service"} {
		execStart := unitExecStart(t, file)
		for _, instance := range []string{"0", "42", "99"} {
			args, refused := unitCommand(t, execStart, instance)
			if refused != nil || len(args) == 0 {
				t.Errorf("%s@%s: %q %v", file, instance, args, refused)
				continue
			}
			c, ok := commands[args[0]]
			if !ok {
				t.Fatalf("%s: no subcommand %q", file, args[0])
			}
			var out, errOut strings.Builder
			if err := c.run(t.Context(), append(args[1:len(args):len(args)], "--help"), &out, &errOut); !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s@%s: %q does not parse: %v\n%s", file, instance, args, err, errOut.String())
			}
		}
	}
}

// loopbackPort is the port of listen, a 127.0.0.1 address with a port from 1 to 65535; ok false
// (the test failed) otherwise.
func loopbackPort(t *testing.T, file, instance, listen string) (int, bool) {
	t.Helper()
	host, p, err := net.SplitHostPort(listen)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host != "127.0.0.1" || port < 1 || port > 65535 {
		t.Errorf("%s@%s: --http-listen %q is no loopback address with a port from 1 to 65535", file, instance, listen)
		return 0, false
	}
	return port, true
}

// TestDeployUnitRefusalNotRestarted: a templated unit started with an instance name its script
// refuses (mcpstream-executor@east) exits 2, and Restart=on-failure started it again every
// RestartSec (2 s) forever: five starts take 8 s, under the default start limit (5 in 10 s), so
// systemd never gave up, logging the refusal every 2 s. A refusal, as any usage error (exit
// status 2: the command line is wrong), is not restarted: the unit fails, and says why.
func TestDeployUnitRefusalNotRestarted(t *testing.T) {
	for _, file := range []string{"mcpstream-indexer@.service", "mcpstream-executor@.service"} {
		_, refused := unitCommand(t, unitExecStart(t, file), "east")
		var exit *exec.ExitError
		if !errors.As(refused, &exit) {
			t.Fatalf("%s@east: %v, want the script to refuse the instance", file, refused)
		}
		var prevent []string
		for _, line := range strings.Split(readDeploy(t, file), "\n") {
			if v, ok := strings.CutPrefix(line, "RestartPreventExitStatus="); ok {
				prevent = append(prevent, strings.Fields(v)...)
			}
		}
		if !slices.Contains(prevent, strconv.Itoa(exit.ExitCode())) {
			t.Errorf("%s: an instance it refuses exits %d, which RestartPreventExitStatus %q does not name: restarted every RestartSec forever",
				file, exit.ExitCode(), prevent)
		}
	}
}
