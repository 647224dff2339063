//go:build unix

package registrysync

import (
	"os/exec"
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
