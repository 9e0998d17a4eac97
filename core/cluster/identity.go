package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// credentialKinds are the stored credentials a cluster accepts: its nodes'
// root's, and those of the peer clusters that watch it (which may call
// StatusService only: the access every authenticated caller has).
var credentialKinds = map[string]server.Kind{store.CredNode: server.KindNode, store.CredRoot: server.KindRoot, store.CredPeer: server.KindCluster}

// enrol issues a node's own credential when a join token or an admin
// registers a node that has none, and returns it ("" when none is issued:
// the node re-registers with its credential, or the server has no
// authentication). A join token may not enrol a node that has one. With a
// node CA and a CSR the credential is a client certificate (PEM) instead
// of a token; a node re-registering with its token gets one too, so that
// turning on the node CA moves enrolled nodes to certificates.
func (c *Cluster) enrol(ctx context.Context, p server.Principal, node string, csr []byte) (token string, cert []byte, err error) {
	admin := p.Kind == server.KindUser && p.Role >= server.RoleAdmin
	if len(csr) > 0 && c.opts.NodeCA != nil && (p.Kind == server.KindJoin || p.Kind == server.KindNode || admin) {
		cert, err := c.signNode(ctx, p, node, csr)
		return "", cert, err
	}
	if p.Kind != server.KindJoin && !admin {
		return "", nil, nil
	}
	token, err = identity.NewToken("unyo-node-")
	if err != nil {
		return "", nil, internal(err)
	}
	err = c.store.AddCredential(ctx, store.Credential{Kind: store.CredNode, Name: node, Hash: identity.Hash(token)})
	switch {
	case errors.Is(err, store.ErrExists) && p.Kind == server.KindJoin:
		return "", nil, enrolledAlready(node)
	case errors.Is(err, store.ErrExists):
		return "", nil, nil // an admin re-registering keeps the node's credential
	case err != nil:
		return "", nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("enrol node %q: %w", node, err))
	}
	return token, nil, nil
}

func enrolledAlready(node string) error {
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("node %q is enrolled already, and a join token cannot take it over; to enrol this machine again, an admin runs `unyo nodes delete %s` first", node, node))
}

// signNode signs a certificate for node's CSR with the node CA and makes
// its serial the node's current one, which revokes the one before. A join
// token may not replace a certificate or token the node has.
func (c *Cluster) signNode(ctx context.Context, p server.Principal, node string, csr []byte) ([]byte, error) {
	if p.Kind == server.KindJoin {
		if _, err := c.store.GetCredential(ctx, store.CredNode, node); err == nil {
			return nil, enrolledAlready(node)
		}
	}
	cert, serial, err := c.opts.NodeCA.SignNode(csr, node, c.opts.NodeCertTTL, time.Now())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	cred := store.Credential{Kind: store.CredNodeCert, Name: node, Hash: serial}
	if p.Kind == server.KindJoin {
		err = c.store.AddCredential(ctx, cred)
	} else {
		err = c.store.PutCredential(ctx, cred)
	}
	switch {
	case errors.Is(err, store.ErrExists):
		return nil, enrolledAlready(node)
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("keep the certificate serial of node %q: %w", node, err))
	}
	c.certAuth.Forget(node)
	return cert, nil
}

// forgetNode makes the revoked or replaced credentials of node stop
// working on this replica at once (others notice within the cache's TTL).
func (c *Cluster) forgetNode(node string) {
	c.auth.Forget(server.KindNode, node)
	if c.certAuth != nil {
		c.certAuth.Forget(node)
	}
}

// probeAddress checks the address a node gives for its status endpoint,
// which the liveness judge GETs: it must be an IP address and port. An
// address that is the one the node connects from is kept; a loopback,
// link-local (cloud metadata) or unspecified one is replaced by the address
// the node connects from, since the cluster could reach only itself or its
// metadata service there; any other IP is kept. So a node can point the
// probe only at itself or at an ordinary address, never at the cluster's
// own loopback services or its metadata endpoint.
func probeAddress(addr, from string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return "", fmt.Errorf("%q: the port must be a number from 1 to 65535", addr)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return "", fmt.Errorf("%q: the host must be an IP address (the agent's status_listen), not a name", addr)
	}
	ip = ip.Unmap()
	peer, perr := netip.ParseAddrPort(from)
	if perr == nil && peer.Addr().Unmap() == ip {
		return addr, nil
	}
	if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		if perr != nil {
			return "", fmt.Errorf("%q is a loopback, link-local or unspecified address, and the node's own address is unknown", addr)
		}
		return net.JoinHostPort(peer.Addr().Unmap().String(), port), nil
	}
	return addr, nil
}

// DeleteNode removes a node and revokes its credential; its agent must
// enrol again with a join token.
func (s *nodeService) DeleteNode(ctx context.Context, req *connect.Request[unyov1.DeleteNodeRequest]) (*connect.Response[unyov1.DeleteNodeResponse], error) {
	name := req.Msg.GetName()
	if req.Msg.GetCluster() != "" && req.Msg.GetCluster() != s.c.opts.Name {
		return connect.NewResponse(&unyov1.DeleteNodeResponse{}), nil
	}
	if p := server.PrincipalFrom(ctx); !p.InCluster(s.c.opts.Name) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not delete nodes of cluster %q", p, s.c.opts.Name))
	}
	before, _ := s.c.store.GetNode(ctx, name)
	by := server.PrincipalFrom(ctx).String()
	err := s.c.deregister(ctx, name, by, fmt.Sprintf("node %q deleted", name))
	if !errors.Is(err, store.ErrNotFound) {
		deleted := err
		if errors.Is(err, errRetire) {
			deleted = nil // the node is deleted; only its events wait
		}
		s.c.audit.Record(ctx, "NodeService/DeleteNode", rbac.Target{Kind: "Node", Name: name, Cluster: s.c.opts.Name}, before, nil, deleted)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in cluster %q", name, s.c.opts.Name))
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewResponse(&unyov1.DeleteNodeResponse{Deleted: 1}), nil
}

// errRetire marks a deregistration whose node is deleted but whose latest
// events and alerts could not be retired yet.
var errRetire = errors.New("retiring the node's events")

// deregister removes a node and revokes its credential (its agent must
// enrol again with a join token), forgets it on this replica, and retires
// its latest events and alerts (by, reason say who and why).
func (c *Cluster) deregister(ctx context.Context, name, by, reason string) error {
	if err := c.store.DeleteNode(ctx, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return err
		}
		return fmt.Errorf("delete node %q: %w", name, err)
	}
	c.forgetNode(name)
	c.knownMu.Lock()
	delete(c.known, name)
	delete(c.nodePlugins, name)
	c.knownMu.Unlock()
	c.beats.forget(name)
	c.log.Info("node deleted and its credential revoked", "node", name, "by", by, "reason", reason)
	// Its latest events and alerts go with it.
	if err := c.retire(ctx, store.ForgetFilter{Node: name}, by, reason); err != nil {
		return fmt.Errorf("%w of %q: %w", errRetire, name, err)
	}
	return nil
}

// keepRootToken stores the credential root gave this cluster when it
// registered, so that root's calls are recognised as root's.
func (c *Cluster) keepRootToken(ctx context.Context, token string) error {
	h := identity.Hash(token)
	if cur, err := c.store.GetCredential(ctx, store.CredRoot, "root"); err == nil && cur.Hash == h {
		return nil
	}
	if err := c.store.PutCredential(ctx, store.Credential{Kind: store.CredRoot, Name: "root", Hash: h}); err != nil {
		return fmt.Errorf("keep root's credential: %w", err)
	}
	c.auth.Forget(server.KindRoot, "root")
	return nil
}
