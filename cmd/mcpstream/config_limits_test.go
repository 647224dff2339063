package main

import (
	"strings"
	"testing"
)

// TestLimitsNotFinite: YAML has .nan and .inf floats. perSecond: .nan passed every check (NaN is
// neither negative nor zero) and became a window of whatever a NaN Duration converts to;
// perSecond: .inf a burst of whatever +Inf converts to, per platform. Both are refused.
func TestLimitsNotFinite(t *testing.T) {
	for name, y := range map[string]string{
		"nan":      "servers: []\nlimits:\n  tenant: {perSecond: .nan}\n",
		"inf":      "servers: []\nlimits:\n  servers:\n    a: {perSecond: .inf, burst: 2}\n",
		"tool inf": "servers: []\nlimits:\n  tools:\n    \"a__*\": {perSecond: .Inf}\n",
	} {
		_, err := parseConfig("c.yaml", []byte(y), func(string) (string, bool) { return "", false })
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "c.yaml") || !strings.Contains(err.Error(), "perSecond") {
			t.Errorf("%s: %v: want the file and the field named", name, err)
		}
	}
}
