package executor

import (
	"errors"
	"math"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestNaNRateRefused: a Rate whose PerSecond is NaN (the command refuses it in the YAML; a
// program building Config may not) got a negative window (the conversion of a NaN to a
// Duration), so one window that never ends: Burst calls, then every call of the scope refused
// forever with a retryAfterMs of 2. New refuses it, as it refuses other limits it cannot apply.
func TestNaNRateRefused(t *testing.T) {
	env := natstest.Start(t)
	nan := Rate{PerSecond: math.NaN(), Burst: 3}
	for name, lim := range map[string]Limits{
		"tenant": {Tenant: nan},
		"server": {Servers: map[string]Rate{"*": nan}},
		"tool":   {Tools: map[string]Rate{"s__*": nan}},
	} {
		if _, err := New(env.NC, Config{Limits: lim}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s limit with a NaN perSecond: err %v, want ErrConfig", name, err)
		}
	}
}
