package registrysync

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A server (or a gateway, a WAF in front of it) that refuses the handshake's POST with a 4xx
// other than 401 — 403 for a credential it does not take, 429 while it sheds load — was
// reported "server returned 4xx for initialize POST, likely a legacy SSE server" (mcp-go's
// error): the status, the only clue, was lost, and the reason sent the operator to the wrong
// fix. The status says the HTTP answer (and a 429 the Retry-After it asked for); only a 404,
// 405 or 400, which a legacy HTTP+SSE server's URL may answer, suggests the transport.
func TestHandshakeRefusedStatusSaysWhy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status       int
		retryAfter   string
		want, unwant []string
	}{
		{http.StatusForbidden, "", []string{"HTTP 403 (Forbidden)"}, []string{"legacy"}},
		{http.StatusTooManyRequests, "120", []string{"HTTP 429 (Too Many Requests)", "Retry-After 2m0s"}, []string{"legacy"}},
		{http.StatusNotFound, "", []string{"HTTP 404 (Not Found)", "transport: sse"}, nil},
	}
	for _, tc := range cases {
		for _, pin := range []string{"2025-11-25", ""} {
			t.Run(strconv.Itoa(tc.status)+"/"+pin, func(t *testing.T) {
				t.Parallel()
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					http.Error(w, "refused\x01", tc.status)
				}))
				t.Cleanup(ts.Close)
				h := run(t, nil, fastConfig(ServerConfig{Name: "refuses", URL: ts.URL + "/mcp", ProtocolVersion: pin}))
				rec := record(t, h.env, subjects.RegistryServer("refuses"))
				e := rec.wait(0, "connect_failed", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
				reason := e.ev.Status.Reason
				for _, w := range tc.want {
					if !strings.Contains(reason, w) {
						t.Errorf("reason %q does not say %q", reason, w)
					}
				}
				for _, w := range tc.unwant {
					if strings.Contains(reason, w) {
						t.Errorf("reason %q says %q", reason, w)
					}
				}
			})
		}
	}
}
