package registrysync

import (
	"testing"
)

func TestFastRouter(t *testing.T) {
	var r fastRouter
	if r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-1","result":{}}`)) {
		t.Fatal("routed with nobody waiting")
	}
	one := r.register("mcpstream-1")
	two := r.register("mcpstream-2")
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"mcpstream-1"}}`, // a notification
		`{"jsonrpc":"2.0","id":"mcpstream-1","method":"ping"}`,                               // a request from the server
		`{"jsonrpc":"2.0","id":1,"result":{"note":"mcpstream-1"}}`,                           // mcp-go's own request
		`{"jsonrpc":"2.0","id":"mcpstream-9","result":{}}`,                                   // nobody waits for it
		`{"jsonrpc":"2.0","id":"mcpstream-1","result":`,                                      // cut short
	} {
		if r.route([]byte(line)) {
			t.Errorf("routed %s", line)
		}
	}
	buf := []byte(`{"result":{"content":[{"type":"text","text":"ok"}]},"jsonrpc":"2.0","id":"mcpstream-1"}`)
	if !r.route(buf) {
		t.Fatal("the answer to mcpstream-1 was not routed")
	}
	copy(buf, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX") // the reader reuses its buffer
	if got := <-one; string(got.result) != `{"content":[{"type":"text","text":"ok"}]}` || got.rpcErr != nil {
		t.Errorf("got %s %+v", got.result, got.rpcErr)
	}
	if r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-1","result":{}}`)) {
		t.Error("a second answer to mcpstream-1 was routed")
	}
	if !r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-2","error":{"code":-32602,"message":"bad"}}`)) {
		t.Fatal("the error answer to mcpstream-2 was not routed")
	}
	if got := <-two; got.rpcErr == nil || got.rpcErr.Code != -32602 || got.result != nil {
		t.Errorf("got %s %+v", got.result, got.rpcErr)
	}
	r.register("mcpstream-3")
	r.forget("mcpstream-3")
	if r.route([]byte(`{"jsonrpc":"2.0","id":"mcpstream-3","result":{}}`)) || r.n.Load() != 0 {
		t.Error("routed after forget")
	}
}
