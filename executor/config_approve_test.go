package executor

import (
	"errors"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
)

// An approve pattern that matches nothing (no tool part, a broken glob) is refused: a tool meant
// to need approval would have run without one.
func TestNewRefusesBadApprovePattern(t *testing.T) {
	env := natstest.Start(t)
	for _, pat := range []string{"", "github", "github__", "[a__b]", "__x"} {
		if _, err := New(env.NC, Config{Approve: []string{"ticketing__*", pat}}); !errors.Is(err, ErrConfig) {
			t.Errorf("approve %q: err %v, want ErrConfig", pat, err)
		}
	}
	if _, err := New(env.NC, Config{Approve: []string{"ticketing__close*", "*__delete_*"}}); err != nil {
		t.Errorf("valid patterns refused: %v", err)
	}
}
