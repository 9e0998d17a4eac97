package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// addCluster issues a cluster's credential at root (`unyo clusters add`),
// waiting for root to answer, and returns it.
func (f *fleet) addCluster(name string) string {
	f.t.Helper()
	return addClusterAt(f.t, f.rootURL, name)
}

// addClusterAt is addCluster for the root at rootURL; args go before the
// command (--ca-file).
func addClusterAt(t testing.TB, rootURL, name string, args ...string) string {
	t.Helper()
	var token string
	testutil.Eventually(t, 30*time.Second, "root to issue the credential of cluster "+name, func() error {
		out, err := cli(t, rootURL, append(append([]string{"--token", adminToken}, args...), "clusters", "add", name)...)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(out)
		if !strings.HasPrefix(token, "unyo-cluster-") {
			return fmt.Errorf("clusters add printed %q", out)
		}
		return nil
	})
	return token
}

// enrol registers node at the cluster with the join token and returns
// clients presenting the node's own credential, as an agent does.
func enrol(ctx context.Context, url string, node *unyov1.Node) (*client.Clients, error) {
	tok, err := enrolToken(ctx, url, node)
	if err != nil {
		return nil, err
	}
	return client.New(client.Options{URL: url, Token: tok, Timeout: 10 * time.Second})
}

// enrolToken registers node with the join token and returns its credential.
func enrolToken(ctx context.Context, url string, node *unyov1.Node) (string, error) {
	j, err := client.New(client.Options{URL: url, Token: joinToken, Timeout: 10 * time.Second})
	if err != nil {
		return "", err
	}
	resp, err := j.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: node}))
	if err != nil {
		return "", err
	}
	if resp.Msg.GetNodeToken() == "" {
		return "", fmt.Errorf("enrolling node %q returned no credential", node.GetName())
	}
	return resp.Msg.GetNodeToken(), nil
}
