package registrysync

import (
	"errors"
	"testing"
)

// What no process can be started with is refused by Validate (and so by Run and Add), not
// retried forever: an env name holding '=' (FOO=BAR set FOO to "BAR=value", silently) or
// empty, a NUL byte in an env value, the command or an argument (the start failed "invalid
// argument" at every attempt).
func TestValidateStdioEnvAndArgs(t *testing.T) {
	base := ServerConfig{Name: "s", Transport: TransportStdio, Command: "/bin/true"}
	for name, mutate := range map[string]func(*ServerConfig){
		"env name with =":  func(sc *ServerConfig) { sc.Env = map[string]string{"FOO=BAR": "x"} },
		"empty env name":   func(sc *ServerConfig) { sc.Env = map[string]string{"": "x"} },
		"NUL in env name":  func(sc *ServerConfig) { sc.Env = map[string]string{"A\x00B": "x"} },
		"NUL in env value": func(sc *ServerConfig) { sc.Env = map[string]string{"A": "x\x00y"} },
		"NUL in command":   func(sc *ServerConfig) { sc.Command = "/bin/true\x00x" },
		"NUL in an arg":    func(sc *ServerConfig) { sc.Args = []string{"ok", "a\x00b"} },
	} {
		sc := base
		mutate(&sc)
		if err := Validate(sc); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
	}
	ok := base
	ok.Env = map[string]string{"A": "x=y=z", "B": ""}
	ok.Args = []string{"--k=v", ""}
	if err := Validate(ok); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}
