package indexer

import "syscall"

// diskFree is the space an unprivileged process may still write on dir's filesystem; ok is
// false when it cannot be known. On Darwin, f_bavail counts blocks of f_bsize, the
// filesystem's fundamental block size (f_iosize is the preferred transfer size).
func diskFree(dir string) (free int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
