package executor

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// resultFits takes a result without encoding its answer only when answerEnvelope bounds the
// answer's envelope: whatever the id, tenant and tool (bytes JSON and subject tokens escape to
// their longest, the longest ids), the room counted exactly is never less than that bound
// leaves, so a result the exact count would refuse is never taken.
func TestAnswerEnvelopeBound(t *testing.T) {
	long := func(s string, n int) string { return strings.Repeat(s, n)[:n] }
	texts := []string{"", "c-1", "local", long("\x01", maxCallID), long("<", maxToolName), long("\xff", maxCallID),
		long("\u2028", maxCallID), long(".", 300), long("~\"\\", 1000)}
	zone := time.FixedZone("", -(12*3600 + 59*60))
	for _, id := range texts {
		for _, tenant := range texts {
			for _, tool := range texts {
				res := subjects.CallResult{V: math.MaxInt, ID: id, Tenant: tenant, Tool: tool, Attempts: math.MaxInt,
					Duplicate: true, StartedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, zone)}
				for _, seq := range []uint64{0, 1, math.MaxUint64} {
					const mp = 1 << 20
					if exact, bound := answerRoom(mp, res, seq), mp-answerEnvelope(res)-answerSlack; exact < bound {
						t.Fatalf("id %q, tenant %q, tool %q, seq %d: room %d, but answerEnvelope leaves %d", id, tenant, tool, seq, exact, bound)
					}
				}
			}
		}
	}
}
