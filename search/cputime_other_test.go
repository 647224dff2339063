//go:build !linux

package search

import "time"

func threadCPU() time.Duration { return 0 }
