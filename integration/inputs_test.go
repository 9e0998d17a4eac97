package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestBadRequestsDoNotKillDev sends malformed JSON requests to a real
// `unyo dev` (root on its port, the cluster on the next): each is refused
// with the field named, and the process keeps serving. ObjectService/Get
// with {} used to panic in root's fan-out goroutine and end the process.
func TestBadRequestsDoNotKillDev(t *testing.T) {
	host, p := freePortRun(t, 3) // dev serves root here, the cluster and agent on the next two ports
	addr := net.JoinHostPort(host, strconv.Itoa(p))
	rootURL, clusterURL := "http://"+addr, fmt.Sprintf("http://%s:%d", host, p+1)
	dev := startUnyo(t, "dev", nil, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	testutil.Eventually(t, 60*time.Second, "unyo dev's cluster to register at its root", func() error {
		out, err := cli(t, rootURL, "clusters", "ls")
		if err == nil && !strings.Contains(out, "yes") {
			err = fmt.Errorf("clusters ls: %s", out)
		}
		return err
	})

	tests := []struct {
		name, url, procedure, body, want string
	}{
		{"Get {} at root", rootURL, "ObjectService/Get", `{}`, "ref.kind: required"},
		{"Get without a name at root", rootURL, "ObjectService/Get", `{"ref":{"kind":"Check"}}`, "ref.name: required"},
		{"misspelt field at root", rootURL, "ObjectService/List", `{"kind":"Check","clustr":"local"}`, `unknown field \"clustr\"`},
		{"unbounded limit at root", rootURL, "EventService/ListEvents", `{"history":true,"limit":2147483647}`, "limit: 2147483647 is more than the maximum of 10000"},
		{"misspelt field at the cluster", clusterURL, "ObjectService/Apply", `{"objects":[{"check":{"name":"x","spec":{"comand":["true"]}}}]}`, `unknown field \"comand\"`},
		{"CRLF in a node address", clusterURL, "AgentService/Register", `{"node":{"name":"evil","address":"127.0.0.1:1\r\nX-Evil: 1"}}`, "node.address"},
		{"too many labels", clusterURL, "AgentService/Register", `{"node":{"name":"evil","labels":{` + manyLabelsJSON(101) + `}}}`, "node.labels: 101 labels, at most 100 are allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(tt.url+"/unyo.v1."+tt.procedure, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatalf("the request failed (did unyo dev die?): %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tt.want) {
				t.Fatalf("got %d %s, want 400 naming %s", resp.StatusCode, b, tt.want)
			}
		})
	}
	if dev.exited() {
		t.Fatal("unyo dev exited")
	}
	if _, err := cli(t, rootURL, "nodes", "ls"); err != nil {
		t.Fatalf("unyo dev no longer answers: %v", err)
	}
}

func manyLabelsJSON(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(parts, ",")
}
