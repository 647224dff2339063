package indexer

import "testing"

// TestStatfsAvailInFragments: Linux's statfs counts f_bavail in units of f_frsize (the
// fragment size, as statvfs(3) does), not f_bsize, the preferred transfer size. They differ on
// some filesystems (a FUSE or virtiofs mount of Docker Desktop: f_bsize 1 MiB, f_frsize 4 KiB;
// ZFS, CephFS): counted in f_bsize, free space was taken for 256 times what it is, and a disk
// that was full passed the reserve — the SIGBUS it is there to prevent. A filesystem that
// leaves f_frsize zero counts in f_bsize (as the kernel and glibc then take it).
func TestStatfsAvailInFragments(t *testing.T) {
	for _, tc := range []struct {
		bsize, frsize int64
		avail         uint64
		want          int64
	}{
		{bsize: 1 << 20, frsize: 4096, avail: 1000, want: 1000 * 4096},
		{bsize: 4096, frsize: 4096, avail: 1000, want: 1000 * 4096},
		{bsize: 4096, frsize: 0, avail: 1000, want: 1000 * 4096},
	} {
		if got := statfsAvail(tc.avail, tc.bsize, tc.frsize); got != tc.want {
			t.Errorf("bsize %d, frsize %d, bavail %d: %d bytes free, want %d", tc.bsize, tc.frsize, tc.avail, got, tc.want)
		}
	}
}
