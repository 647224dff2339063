package main

import (
	"context"
	"strings"
	"testing"
)

// TestEmptyPrincipalFlagNotBlamedOnEnvironment: `--principal ""` typed on the command line (as
// `--principal "$VAR"` with the variable unset gives), with $MCPSTREAM_PRINCIPAL unset, said
// `bad principal: "": ... (from $MCPSTREAM_PRINCIPAL)`: the empty flag value equals the empty
// variable, and the variable was blamed for a value it never held. The flag is blamed.
func TestEmptyPrincipalFlagNotBlamedOnEnvironment(t *testing.T) {
	t.Setenv(envPrincipal, "")
	for _, args := range [][]string{
		{"search", "logs"}, {"inspect", "kb__get_document"}, {"call", "kb__get_document", "{}"},
	} {
		_, _, err := runCmd(t, context.Background(), append(args, "--principal", "", "--nats", "nats://127.0.0.1:1")...)
		if err == nil || !strings.Contains(err.Error(), "bad principal") || strings.Contains(err.Error(), "$"+envPrincipal) {
			t.Errorf("%v --principal \"\": %v; want a bad principal blaming the flag, not $%s", args, err, envPrincipal)
		}
	}
}
