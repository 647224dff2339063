package registrysync

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A credential in the URL's query string (?api_key=...) is a secret like a header's: it must not
// reach a published status reason even when it is not also listed in Secrets.
func TestUnreachableQuerySecretRedacted(t *testing.T) {
	t.Parallel()
	const secret = "q5ecr3t/t0k"
	sc := ServerConfig{
		Name: "qdown", Transport: TransportHTTP, URL: "http://127.0.0.1:1/mcp?api_key=" + secret,
	}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("qdown"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	for _, s := range []string{secret, "q5ecr3t%2Ft0k", "q5ecr3t"} {
		if strings.Contains(string(e.data), s) {
			t.Errorf("%q reached the published status: %s", s, e.data)
		}
	}
}
