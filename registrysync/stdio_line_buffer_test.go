package registrysync

import (
	"os"
	"runtime"
	"testing"

	"github.com/rs/zerolog"
)

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// One large stdout line (a big tool result, a big list page: up to maxLineBytes) is not held
// for the life of the child: the reader's line buffer grew to its size and was kept for every
// later line, so each stdio child kept the memory of the largest message it ever sent (tens of
// MB, for days). Not parallel: it measures the heap.
func TestStdioLargeLineBufferNotRetained(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatal("no /bin/sh: the test needs a POSIX shell")
	}
	const size = 32 << 20
	// A JSON string of size bytes on one line, then a small message, then the child lives on.
	sc := ServerConfig{Name: "big", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `head -c 33554432 /dev/zero | tr '\0' 'a' | { printf '"'; cat; printf '"\n'; echo '{"jsonrpc":"2.0","method":"x"}'; }; exec sleep 1000`}}
	before := liveHeap()
	c, err := startChild(sc, newRedactor(sc), zerolog.Nop(), maxLineBytes, maxLineBytes, func(s string, _ bool) { t.Error("malformed:", s) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	buf := make([]byte, 1<<20)
	n, lines := 0, 0
	for lines < 2 {
		k, err := c.fwdR.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		n += k
		for _, b := range buf[:k] {
			if b == '\n' {
				lines++
			}
		}
	}
	if n < size {
		t.Fatalf("forwarded %d bytes, want the whole line", n)
	}
	// The reader has handled both lines and waits for more.
	if grown := int64(liveHeap()) - int64(before); grown > size/2 {
		t.Errorf("heap grew by %d MiB while the child idles after one %d MiB line: its buffer is held", grown>>20, size>>20)
	}
}
