package indexer

import (
	"testing"

	"github.com/mcpstream/mcpstream/staleness"
)

// The removed tool names the executor's freshness view remembers a server (staleness.New's: a call
// of one is refused stale, not not_found) are as many as the catalog remembers by default
// (details say "removed"): staleness cannot import this package, so the two constants are kept
// equal here. (The catalog's own view remembers fewer: see viewBound.)
func TestDefaultMaxRemovedIsTheViewsBound(t *testing.T) {
	if DefaultMaxRemoved != staleness.MaxRemembered {
		t.Fatalf("DefaultMaxRemoved = %d, staleness.MaxRemembered = %d: want them equal", DefaultMaxRemoved, staleness.MaxRemembered)
	}
}
