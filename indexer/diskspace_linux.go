package indexer

import "syscall"

// diskFree is the space an unprivileged process may still write on dir's filesystem; ok is
// false when it cannot be known.
func diskFree(dir string) (free int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return statfsAvail(uint64(st.Bavail), int64(st.Bsize), int64(st.Frsize)), true
}

// statfsAvail is the space of bavail free blocks, as statfs(2) gives them on Linux: counted in
// f_frsize units (the fragment size; statvfs(3) says so, and df reads them so), not in f_bsize,
// the preferred transfer size — on some filesystems (FUSE and virtiofs mounts, ZFS, CephFS)
// many times larger, and free space counted in it many times what there is. A filesystem that
// leaves f_frsize zero counts in f_bsize (the kernel then reports f_bsize as f_frsize).
func statfsAvail(bavail uint64, bsize, frsize int64) int64 {
	if frsize <= 0 {
		frsize = bsize
	}
	return int64(bavail) * frsize
}
