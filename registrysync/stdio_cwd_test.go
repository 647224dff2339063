package registrysync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestStdioCwd: a server's Dir (config `cwd`) is its child's working directory, where a
// relative command is found; a Dir that does not exist is connect_failed with a reason that
// names the working directory, not a bare "no such file or directory".
func TestStdioCwd(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "fixture")); err != nil {
		t.Fatal(err)
	}
	inDir := stdioServer(t, "indir", "fixture")
	inDir.Command, inDir.Dir, inDir.Kinds = "./fixture", dir, []string{"tools"}
	gone := stdioServer(t, "gone", "fixture")
	gone.Dir = filepath.Join(dir, "no-such-dir")
	h := run(t, nil, fastConfig(inDir, gone))

	rec := record(t, h.env, subjects.RegistryServer("indir"))
	e := rec.wait(0, "ready or unavailable", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) || isStatus(subjects.StatusUnavailable, "*")(e)
	})
	if e.ev.Status.Status != subjects.StatusReady {
		t.Errorf("indir: %s %s %q: want ready (./fixture found in its cwd)", e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
	}

	rec = record(t, h.env, subjects.RegistryServer("gone"))
	e = rec.wait(0, "connect failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	if r := e.ev.Status.Reason; !strings.Contains(r, "working directory") || !strings.Contains(r, "no-such-dir") {
		t.Errorf("gone: reason %q: want the working directory named", r)
	}
}
