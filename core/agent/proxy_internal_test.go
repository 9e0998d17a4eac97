package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/server"
)

// The proxy forwards with the node's credential and the compute of its
// port, whatever the compute sent, and only for the compute's token.
func TestComputeProxy(t *testing.T) {
	var got *http.Request
	cluster := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(r.Context())
		_, _ = io.WriteString(w, "ok")
	}))
	defer cluster.Close()
	a := &Agent{opts: Options{ClusterURL: cluster.URL, NodeName: "n1"}}
	a.cred.configured = "node-secret"
	h, err := a.computeProxy("web-0")
	if err != nil {
		t.Fatal(err)
	}
	call := func(token string) int {
		r := httptest.NewRequest("POST", "/v1/proxy/unyo.v1.AgentService/Heartbeat", strings.NewReader("{}"))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set(server.HeaderCompute, "db-0") // forged: dropped
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := call("wrong"); code != http.StatusUnauthorized || got != nil {
		t.Fatalf("a wrong token: %d, forwarded %v", code, got != nil)
	}
	if code := call(a.computeToken("web-0")); code != http.StatusOK || got == nil {
		t.Fatalf("the compute's token: %d", code)
	}
	if got.URL.Path != "/unyo.v1.AgentService/Heartbeat" || got.Header.Get("Authorization") != "Bearer node-secret" ||
		got.Header.Values(server.HeaderCompute)[0] != "web-0" || len(got.Header.Values(server.HeaderCompute)) != 1 {
		t.Errorf("forwarded %s with %v", got.URL.Path, got.Header)
	}
	if a.computeToken("web-0") == a.computeToken("web-1") {
		t.Error("two computes share a token")
	}
}
