package registrysync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestStdioCommandFoundOnConfiguredPath: a server whose env sets PATH (as MCP client configs do
// to reach npx or uvx where the host's PATH does not: nvm, a venv) was looked up on this
// process's PATH, not the child's: "executable file not found in $PATH", while the MCP SDKs
// (node's spawn, Python's subprocess) find it on the PATH of the environment given. The
// command is found on the configured PATH; one on neither is still connect_failed, not found.
func TestStdioCommandFoundOnConfiguredPath(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	const name = "mcpstream-test-fixture-server"
	if err := os.Symlink(exe, filepath.Join(bin, name)); err != nil {
		t.Fatal(err)
	}
	found := stdioServer(t, "found", "fixture", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	found.Command = name
	found.Kinds = []string{"tools"}
	missing := stdioServer(t, "missing", "fixture", "PATH="+t.TempDir())
	missing.Command = name
	h := run(t, nil, fastConfig(found, missing))

	rec := record(t, h.env, subjects.RegistryServer("found"))
	e := rec.wait(0, "ready or unavailable", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) || isStatus(subjects.StatusUnavailable, "*")(e)
	})
	if e.ev.Status.Status != subjects.StatusReady {
		t.Errorf("found: %s %s %q: want ready", e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
	}

	rec = record(t, h.env, subjects.RegistryServer("missing"))
	e = rec.wait(0, "connect failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	if !strings.Contains(e.ev.Status.Reason, "not found") {
		t.Errorf("missing: reason %q does not say not found", e.ev.Status.Reason)
	}
}

// TestStdioCommandNotOnConfiguredPathSaysWhy: a command not found on the PATH a server's env
// sets was reported "executable file not found in $PATH (the PATH its env sets)": an operator
// reads $PATH, this process's, where the command typically is (npx on the host), and the
// entries passed over unsaid — "~/.nvm/...", which nothing expands, is a common one. The reason
// names the env's PATH alone and says that entries that are not absolute were passed over.
func TestStdioCommandNotOnConfiguredPathSaysWhy(t *testing.T) {
	t.Parallel()
	sc := stdioServer(t, "tilde", "fixture", "PATH=~/.nvm/bin"+string(os.PathListSeparator)+t.TempDir())
	sc.Command = "mcpstream-test-fixture-server"
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("tilde"))
	e := rec.wait(0, "connect failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	r := e.ev.Status.Reason
	if strings.Contains(r, "$PATH") || !strings.Contains(r, "the PATH its env sets") || !strings.Contains(r, "not absolute") || !strings.Contains(r, "~") {
		t.Errorf("reason %q: want the env's PATH named (not $PATH) and its entry that is not absolute ('~' not expanded) said passed over", r)
	}
}
