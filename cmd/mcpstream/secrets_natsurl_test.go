package main

import (
	"strings"
	"testing"
)

// TestHelpHidesNATSCredentials: --nats defaults to $MCPSTREAM_NATS, and Go's flag package
// prints a flag's default in the usage: `mcpstream servers --help`, and every mistyped flag of
// a unit (the usage goes to stderr, into the journal), printed the NATS password or token of
// the environment in full. The usage shows the default redacted, as every other message does.
func TestHelpHidesNATSCredentials(t *testing.T) {
	t.Setenv(envNATS, "nats://bob:hunter2Secret@127.0.0.1:1,nats://s3cretT0ken@127.0.0.1:2,carol:pw4Secret@127.0.0.1:3")
	cmds := [][]string{
		{"servers"}, {"servers", "remove"}, {"call"}, {"events"}, {"search"}, {"inspect"},
		{"approve"}, {"deny"}, {"policy", "check"}, {"executor"}, {"indexer"}, {"registrysync"},
	}
	for _, c := range cmds {
		for _, extra := range []string{"--help", "--no-such-flag"} {
			out, errOut, _ := catRun(t, append(append([]string{}, c...), extra)...)
			all := out + errOut
			for _, secret := range []string{"hunter2Secret", "s3cretT0ken", "pw4Secret"} {
				if strings.Contains(all, secret) {
					t.Errorf("%s %s shows the NATS credential %q of $%s:\n%s", strings.Join(c, " "), extra, secret, envNATS, all)
				}
			}
			if extra == "--help" && !strings.Contains(all, "nats://bob:***@127.0.0.1:1") {
				t.Errorf("%s --help does not show the default NATS URL redacted:\n%s", strings.Join(c, " "), all)
			}
		}
	}
}

// TestRedactNATSURLWithoutScheme: nats.go takes a URL without a scheme as nats:// (see its
// parseServerURL), so `--nats bob:PASSWORD@host:4222` connects, and its credentials were shown
// as they were in the connect error and up's banner.
func TestRedactNATSURLWithoutScheme(t *testing.T) {
	for u, want := range map[string]string{
		"bob:hunter22@127.0.0.1:4222":              "bob:***@127.0.0.1:4222",
		"s3cretT0ken@127.0.0.1:4222":               "***@127.0.0.1:4222",
		"127.0.0.1:4222":                           "127.0.0.1:4222",
		"nats://a:pw1@h:1, tok2@h:2 ,h:3":          "nats://a:***@h:1, ***@h:2 ,h:3",
		" carol:pw4@h:4":                           " carol:***@h:4",
		"nats://127.0.0.1:4222,dave:p@ss:word@h:5": "nats://127.0.0.1:4222,dave:***@h:5",
	} {
		if got := redactURL(u); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", u, got, want)
		}
	}
	if got := scrubCredentials(`parse "nats://bob:hunter22@[::1": missing ']' in host`, "bob:hunter22@[::1"); strings.Contains(got, "hunter22") {
		t.Errorf("scrubCredentials left the password of a URL without a scheme: %q", got)
	}

	_, errOut, err := catRun(t, "servers", "--nats", "bob:hunter22@127.0.0.1:1")
	if err == nil {
		t.Fatal("servers connected to nothing")
	}
	if all := errOut + err.Error(); strings.Contains(all, "hunter22") || !strings.Contains(all, "bob:***@127.0.0.1:1") {
		t.Errorf("connect error shows the password, or not the URL redacted: %v\n%s", err, errOut)
	}
}
