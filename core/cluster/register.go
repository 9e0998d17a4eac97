package cluster

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
)

// RegisterAtRoot tells the root where this cluster answers, at once and then
// every interval so that a root that lost its database learns it again.
// rootTLS verifies root's certificate (cluster.root_tls).
func (c *Cluster) RegisterAtRoot(ctx context.Context, rootURL, token string, rootTLS client.TLSOptions, advertiseURL string, interval time.Duration) {
	cl, err := client.New(client.Options{URL: rootURL, Token: token, TLS: rootTLS, Timeout: 10 * time.Second, Logger: c.log,
		Hints: client.Hints{Server: "cluster.root_url", Token: "cluster.root_token", CAFile: "cluster.root_tls.ca_file", TLS: "cluster.root_tls", ClientCert: "cluster.root_tls.cert_file and key_file"}})
	if err != nil {
		c.log.Error("cannot register at root", "root", rootURL, "err", err)
		return
	}
	registered := false
	for {
		resp, err := cl.Cluster.RegisterCluster(ctx, connect.NewRequest(&unyov1.RegisterClusterRequest{Name: c.opts.Name, Url: advertiseURL}))
		if err == nil && resp.Msg.GetRootToken() != "" {
			// Until it is kept, root cannot call this cluster: try again soon.
			err = c.keepRootToken(ctx, resp.Msg.GetRootToken())
		}
		if err == nil {
			err = c.keepPeers(ctx, resp.Msg, rootTLS)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			c.log.Warn("registering at root failed; will retry", "root", rootURL, "err", cl.Explain(err))
			registered = false
		case err == nil && !registered:
			c.log.Info("registered at root", "root", rootURL, "advertise_url", advertiseURL)
			registered = true
		}
		wait := interval
		if !registered {
			wait = min(interval, 2*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-c.rootNudge:
		}
	}
}

// nodeIdentityChanged registers at root again soon, since a node came or
// reported another resource name, hostname or serial: root answers a
// registration by bringing the cluster up to date, node topology included.
func (c *Cluster) nodeIdentityChanged() {
	select {
	case c.rootNudge <- struct{}{}:
	default: // one is pending already
	}
}
