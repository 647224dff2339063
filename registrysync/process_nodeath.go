//go:build unix && !linux

package registrysync

import "syscall"

// setDeathSignal does nothing here: only Linux has a parent-death signal (see
// process_linux.go); a stdio server that outlives its stdin outlives a killed process too.
func setDeathSignal(*syscall.SysProcAttr) {}
