package indexer

import (
	"testing"

	"github.com/mcpstream/mcpstream/staleness"
)

// The removed tool names every freshness view remembers a server (the executor's: a call of one
// is refused stale, not not_found) are as many as the catalog remembers by default (details say
// "removed"): staleness cannot import this package, so the two constants are kept equal here.
func TestDefaultMaxRemovedIsTheViewsBound(t *testing.T) {
	if DefaultMaxRemoved != staleness.MaxRemembered {
		t.Fatalf("DefaultMaxRemoved = %d, staleness.MaxRemembered = %d: want them equal", DefaultMaxRemoved, staleness.MaxRemembered)
	}
}
