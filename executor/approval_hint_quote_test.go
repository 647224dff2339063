package executor

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalHintQuoted: the needs_approval audit event tells an approver the command to run,
// with the call id and tenant in it, and the caller chooses the call id (any 256 bytes). It was
// pasted in as is: an id "c-1; touch pwned" made the suggested command run another one in the
// approver's shell, and an id starting with "-" was read by approve as a flag. The hint quotes
// them for a POSIX shell, and ends the flags before an id that looks like one.
func TestApprovalHintQuoted(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("no sh: the test needs a POSIX shell")
	}
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	for _, tc := range []struct{ tenant, id string }{
		{"local", "c-1"},
		{"acme", "c-1"},
		{"local", "c-1; touch " + pwned},
		{"local", "$(touch " + pwned + ")"},
		{"local", "`touch " + pwned + "`"},
		{"acme", "it's | touch " + pwned},
		{"local", "--nats=nats://127.0.0.1:1"},
		{"acme", "-h"},
		{"a c;me", "c 1"},
		{"local", "*"},
	} {
		hint := approvalHint(&call{tenant: tc.tenant, req: subjects.CallRequest{ID: tc.id}, tool: &tool{Public: "kb__wipe"}}, time.Minute)
		_, cmd, ok := strings.Cut(hint, "needs approval: ")
		if ok {
			cmd, _, ok = strings.Cut(cmd, " (or deny)")
		}
		if !ok {
			t.Fatalf("hint %q: no command in it", hint)
		}
		// The command as a shell runs it, mcpstream printing its arguments.
		var out bytes.Buffer
		c := exec.Command(sh, "-c", `mcpstream() { printf '%s\0' "$@"; }; `+cmd)
		c.Dir, c.Stdout, c.Stderr = dir, &out, io.Discard
		if err := c.Run(); err != nil {
			t.Errorf("id %q: %s: %v", tc.id, cmd, err)
			continue
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Fatalf("id %q: the suggested command %s ran another command", tc.id, cmd)
		}
		args := strings.Split(strings.TrimSuffix(out.String(), "\x00"), "\x00")
		if len(args) == 0 || args[0] != "approve" {
			t.Errorf("id %q: %s gives %q", tc.id, cmd, args)
			continue
		}
		// Parsed as approve parses it (cmd/mcpstream parseFlags): flags and the one ID.
		fs := flag.NewFlagSet("approve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		tenant := fs.String("tenant", "local", "")
		fs.String("nats", "", "")
		var ids []string
		rest := args[1:]
		for {
			if err := fs.Parse(rest); err != nil {
				t.Errorf("id %q: %s: %v", tc.id, cmd, err)
				break
			}
			left := fs.Args()
			if len(left) == 0 {
				break
			}
			if len(rest) > len(left) && rest[len(rest)-len(left)-1] == "--" {
				ids = append(ids, left...)
				break
			}
			ids = append(ids, left[0])
			rest = left[1:]
		}
		if !slices.Equal(ids, []string{tc.id}) || *tenant != tc.tenant {
			t.Errorf("id %q tenant %q: %s is read as ids %q, tenant %q", tc.id, tc.tenant, cmd, ids, *tenant)
		}
	}
}
