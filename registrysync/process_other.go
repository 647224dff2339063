//go:build !unix

package registrysync

import "os/exec"

func setProcessGroup(cmd *exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// lookPathIn finds file on this process's PATH (executable extensions and the rest are
// exec.LookPath's; a PATH set in a server's env is not looked in here).
func lookPathIn(file, _ string) (string, error) { return exec.LookPath(file) }
