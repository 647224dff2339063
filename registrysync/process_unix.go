//go:build unix

package registrysync

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// setProcessGroup starts the child in its own process group so that stopping it also stops
// the processes it started (npx → node, shell wrappers).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
// exec.LookPath does in $PATH: relative directories (".", "") are passed over, as LookPath
// refuses what they find (exec.ErrDot).
func lookPathIn(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: fmt.Errorf("%w (the PATH its env sets)", exec.ErrNotFound)}
}
