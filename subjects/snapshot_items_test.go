package subjects

import (
	"errors"
	"strings"
	"testing"
)

// snapshotOf is a snapshot event whose items (and rejected, when given) are the JSON texts
// given, under the member names given.
func snapshotOf(itemsKey string, items int, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"v":1,"type":"snapshot","server":"s","kind":"tools","fingerprint":"f","listedAt":"2026-01-01T00:00:00Z","pages":1,"` + itemsKey + `":[`)
	for i := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("0")
	}
	b.WriteString("]" + extra + "}")
	return []byte(b.String())
}

// A snapshot of more than MaxSnapshotItems items and rejections is refused before its items
// are decoded: one hostile 8 MiB snapshot of millions of "0," items took gigabytes and
// minutes in each consumer, at every replay. The count sees what encoding/json would decode:
// a member named up to case, a member repeated, and the rejections.
func TestSnapshotItemsBounded(t *testing.T) {
	rej := `,"rejected":[{"code":"x","message":"m"}]`
	for _, tc := range []struct {
		name string
		data []byte
		bad  bool
	}{
		{"at the bound", snapshotOf("items", MaxSnapshotItems, ""), false},
		{"over the bound", snapshotOf("items", MaxSnapshotItems+1, ""), true},
		{"over with a rejection", snapshotOf("items", MaxSnapshotItems, rej), true},
		{"named up to case", snapshotOf("ITEMS", MaxSnapshotItems+1, ""), true},
		{"repeated", snapshotOf("items", MaxSnapshotItems/2+1, `,"items":[`+strings.Repeat("0,", MaxSnapshotItems/2)+`0]`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeRegistry(tc.data)
			if tc.bad {
				if !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), "more than") {
					t.Fatalf("got %v, want ErrBadPayload (too many items)", err)
				}
				return
			}
			if err != nil || ev.Snapshot == nil || len(ev.Snapshot.Items) != MaxSnapshotItems {
				t.Fatalf("got %v (snapshot %v), want the snapshot decoded", err, ev.Snapshot != nil)
			}
		})
	}
}
