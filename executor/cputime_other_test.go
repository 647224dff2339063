//go:build !linux

package executor

import "time"

// processTreeCPU is not available here.
func processTreeCPU() (time.Duration, bool) { return 0, false }
