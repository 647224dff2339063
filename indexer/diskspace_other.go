//go:build !linux && !darwin

package indexer

// diskFree is not known here: no write is refused for want of space.
func diskFree(string) (int64, bool) { return 0, false }
