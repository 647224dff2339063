//go:build unix

package registrysync

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// setProcessGroup starts the child in its own process group so that stopping it also stops
// the processes it started (npx → node, shell wrappers). On Linux the child also gets SIGKILL
// when this process dies without stopping it (see setDeathSignal).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends sig to the child's process group; kill reports whether SIGKILL was meant.
func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// lookPathIn finds the executable file in the directories of path (a PATH value), as
// exec.LookPath does in $PATH: relative directories (".", "", "~/bin": nothing expands a '~')
// are passed over, as LookPath refuses what they find (exec.ErrDot). Its error (a
// *notOnPathError, which is exec.ErrNotFound) names the env's PATH, not $PATH, and says how
// many entries were passed over so.
func lookPathIn(file, path string) (string, error) {
	e := &notOnPathError{file: file}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			e.relative++
			e.tilde = e.tilde || strings.HasPrefix(dir, "~")
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", e
}

// notOnPathError is lookPathIn's: file is on none of the absolute directories of the PATH a
// server's env sets; relative counts its entries that are not absolute (passed over), tilde
// whether one begins with '~'. (No entry is quoted: env values are redacted as secrets.)
type notOnPathError struct {
	file     string
	relative int
	tilde    bool
}

func (e *notOnPathError) Error() string {
	msg := fmt.Sprintf("executable file %q not found on the PATH its env sets", e.file)
	if e.relative > 0 {
		msg += fmt.Sprintf(" (%d of its entries not absolute, passed over", e.relative)
		if e.tilde {
			msg += "; a '~' is not expanded"
		}
		msg += ")"
	}
	return msg
}

func (e *notOnPathError) Unwrap() error { return exec.ErrNotFound }
