package root

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// credentialKinds are the stored credentials root accepts: its clusters'.
var credentialKinds = map[string]server.Kind{store.CredCluster: server.KindCluster}

// RegisterCluster records where a cluster answers. Only the cluster itself
// (with the credential `unyo clusters add` issued for its name) or an admin
// may, so nobody else can add a cluster or move one to another URL. The
// caller gets the credential root presents to this cluster alone.
func (s *clusterService) RegisterCluster(ctx context.Context, req *connect.Request[unyov1.RegisterClusterRequest]) (*connect.Response[unyov1.RegisterClusterResponse], error) {
	m := req.Msg
	if err := validate.Name(m.GetName()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("name: %w", err))
	}
	if _, err := client.New(client.Options{URL: m.GetUrl()}); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("url: %w", err))
	}
	p := server.PrincipalFrom(ctx)
	switch {
	case p.Kind == server.KindCluster && p.Name != m.GetName():
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("the credential of cluster %q cannot register cluster %q", p.Name, m.GetName()))
	case p.Kind == server.KindCluster, p.IsUser() && p.Role >= server.RoleAdmin:
	default:
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not register clusters: a cluster registers with the credential `unyo clusters add %s` printed", p, m.GetName()))
	}
	resp := &unyov1.RegisterClusterResponse{}
	if p.Kind != server.KindAnonymous {
		tok, err := s.r.rootToken(ctx, m.GetName())
		if err != nil {
			return nil, err
		}
		resp.RootToken = tok
	}
	url := m.GetUrl()
	if cur, err := s.r.store.GetCluster(ctx, m.GetName()); err == nil {
		url = withReplica(cur.GetUrl(), url)
	}
	if err := s.r.store.UpsertCluster(ctx, &unyov1.ClusterInfo{Name: m.GetName(), Url: url, LastSeen: timestamppb.Now()}); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("register cluster %q: %w", m.GetName(), err))
	}
	// Its peers and watchers: an answer without them would make the
	// cluster revoke its watchers, so a failure fails the registration,
	// which the cluster repeats.
	if err := s.r.peersOf(ctx, m.GetName(), resp); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("register cluster %q: %w", m.GetName(), err))
	}
	// A new cluster, or one coming back, gets the objects meant for every
	// cluster.
	s.r.registered(m.GetName())
	return connect.NewResponse(resp), nil
}

// maxReplicaURLs bounds the replicas root remembers for one cluster.
const maxReplicaURLs = 8

// withReplica adds a registering replica's URL to the cluster's list (URLs
// separated by commas, which root's client tries in turn), keeping the
// order, so that root reaches the cluster through whichever replica is up.
// The newest registrations are kept when the list is full.
func withReplica(list, url string) string {
	urls, err := client.SplitURLs(list)
	if err != nil {
		return url
	}
	for _, u := range urls {
		if u == strings.TrimRight(url, "/") {
			return strings.Join(urls, ",")
		}
	}
	urls = append(urls, url)
	return strings.Join(urls[max(0, len(urls)-maxReplicaURLs):], ",")
}

// rootToken returns the credential root presents to the named cluster,
// making one if there is none yet.
func (r *Root) rootToken(ctx context.Context, cluster string) (string, error) {
	cur, err := r.store.GetCredential(ctx, store.CredRootToCluster, cluster)
	if err == nil {
		return cur.Secret, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", connect.NewError(connect.CodeUnavailable, fmt.Errorf("read root's credential for cluster %q: %w", cluster, err))
	}
	tok, err := identity.NewToken("unyo-root-")
	if err != nil {
		return "", connect.NewError(connect.CodeInternal, err)
	}
	err = r.store.AddCredential(ctx, store.Credential{Kind: store.CredRootToCluster, Name: cluster, Hash: identity.Hash(tok), Secret: tok})
	if errors.Is(err, store.ErrExists) { // made by a concurrent registration
		return r.rootToken(ctx, cluster)
	}
	if err != nil {
		return "", connect.NewError(connect.CodeUnavailable, fmt.Errorf("keep root's credential for cluster %q: %w", cluster, err))
	}
	return tok, nil
}

// AddCluster issues a cluster's credential, shown only in this answer.
func (s *clusterService) AddCluster(ctx context.Context, req *connect.Request[unyov1.AddClusterRequest]) (*connect.Response[unyov1.AddClusterResponse], error) {
	name, url := req.Msg.GetName(), req.Msg.GetUrl()
	if err := validate.Name(name); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("name: %w", err))
	}
	if url != "" {
		if _, err := client.New(client.Options{URL: url}); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("url: %w", err))
		}
	}
	tok, err := identity.NewToken("unyo-cluster-")
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	err = s.r.store.AddCredential(ctx, store.Credential{Kind: store.CredCluster, Name: name, Hash: identity.Hash(tok)})
	if errors.Is(err, store.ErrExists) {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("cluster %q has a credential already; to issue a new one run `unyo clusters delete %s` and add it again", name, name))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("add cluster %q: %w", name, err))
	}
	if _, err := s.r.rootToken(ctx, name); err != nil {
		return nil, err
	}
	if url != "" {
		if err := s.r.store.UpsertCluster(ctx, &unyov1.ClusterInfo{Name: name, Url: url}); err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("add cluster %q: %w", name, err))
		}
	}
	s.r.audit.Record(ctx, "ClusterService/AddCluster", rbac.Target{Kind: "Cluster", Name: name}, nil, &unyov1.ClusterInfo{Name: name, Url: url}, nil)
	s.r.log.Info("cluster credential issued", "cluster", name, "url", url, "by", server.PrincipalFrom(ctx).String())
	return connect.NewResponse(&unyov1.AddClusterResponse{Token: tok}), nil
}

// DeleteCluster forgets a cluster and revokes its credentials.
func (s *clusterService) DeleteCluster(ctx context.Context, req *connect.Request[unyov1.DeleteClusterRequest]) (*connect.Response[unyov1.DeleteClusterResponse], error) {
	name := req.Msg.GetName()
	before, _ := s.r.store.GetCluster(ctx, name)
	err := s.r.store.DeleteCluster(ctx, name)
	if !errors.Is(err, store.ErrNotFound) {
		s.r.audit.Record(ctx, "ClusterService/DeleteCluster", rbac.Target{Kind: "Cluster", Name: name}, before, nil, err)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("cluster %q is not known to root", name))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("delete cluster %q: %w", name, err))
	}
	s.r.auth.Forget(server.KindCluster, name)
	s.r.forgetClients(name)
	s.r.watch.mu.Lock()
	delete(s.r.watch.watches, name)
	s.r.watch.mu.Unlock()
	s.r.log.Info("cluster deleted and its credentials revoked", "cluster", name, "by", server.PrincipalFrom(ctx).String())
	return connect.NewResponse(&unyov1.DeleteClusterResponse{}), nil
}

// DeleteNode removes a node from the cluster that has it.
func (s *nodeService) DeleteNode(ctx context.Context, req *connect.Request[unyov1.DeleteNodeRequest]) (*connect.Response[unyov1.DeleteNodeResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) (int32, error) {
		out, err := c.Nodes.DeleteNode(ctx, connect.NewRequest(&unyov1.DeleteNodeRequest{Name: req.Msg.GetName(), Cluster: name}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return out.Msg.GetDeleted(), nil
	})
	resp := &unyov1.DeleteNodeResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Deleted += a.value
	}
	if resp.Deleted == 0 && len(errs) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in any cluster", req.Msg.GetName()))
	}
	return connect.NewResponse(resp), nil
}

// nodeAnswer is a cluster's answer about a node it may hold; most also
// say how many they changed (GetChanged).
type nodeAnswer interface{ GetFound() int32 }

// forwardNode sends a node operation to the cluster that has the node
// (every cluster, or the one named): call gets each cluster's name to put
// in its request. A cluster without the node answers nothing; none with
// it is NotFound. It sums the clusters' found and changed counts.
func forwardNode[R nodeAnswer](ctx context.Context, r *Root, cluster, node string,
	call func(ctx context.Context, c *client.Clients, cluster string) (R, error)) (found, changed int32, errs []*unyov1.ClusterError, err error) {
	targets, err := r.targets(ctx, cluster)
	if err != nil {
		return 0, 0, nil, err
	}
	answers, errs := fanout(ctx, r, targets, func(ctx context.Context, name string, c *client.Clients) (nodeAnswer, error) {
		out, err := call(ctx, c, name)
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		return out, err
	})
	for _, a := range answers {
		if a.value == nil {
			continue
		}
		found += a.value.GetFound()
		if c, ok := a.value.(interface{ GetChanged() int32 }); ok {
			changed += c.GetChanged()
		}
	}
	if found == 0 && len(errs) == 0 {
		return 0, 0, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in any cluster", node))
	}
	return found, changed, errs, nil
}

// msgOf is a connect response's message, nil with an error.
func msgOf[T any](resp *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// CordonNode cordons or uncordons a node in the cluster that has it.
func (s *nodeService) CordonNode(ctx context.Context, req *connect.Request[unyov1.CordonNodeRequest]) (*connect.Response[unyov1.CordonNodeResponse], error) {
	found, changed, errs, err := forwardNode(ctx, s.r, req.Msg.GetCluster(), req.Msg.GetName(), func(ctx context.Context, c *client.Clients, cluster string) (*unyov1.CordonNodeResponse, error) {
		return msgOf(c.Nodes.CordonNode(ctx, connect.NewRequest(&unyov1.CordonNodeRequest{Name: req.Msg.GetName(), Cluster: cluster, Cordoned: req.Msg.GetCordoned()})))
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.CordonNodeResponse{Found: found, Changed: changed, ClusterErrors: errs}), nil
}

// DrainNode starts or stops a drain of a node in the cluster that has it.
func (s *nodeService) DrainNode(ctx context.Context, req *connect.Request[unyov1.DrainNodeRequest]) (*connect.Response[unyov1.DrainNodeResponse], error) {
	found, changed, errs, err := forwardNode(ctx, s.r, req.Msg.GetCluster(), req.Msg.GetName(), func(ctx context.Context, c *client.Clients, cluster string) (*unyov1.DrainNodeResponse, error) {
		in := proto.CloneOf(req.Msg)
		in.Cluster = cluster
		return msgOf(c.Nodes.DrainNode(ctx, connect.NewRequest(in)))
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.DrainNodeResponse{Found: found, Changed: changed, ClusterErrors: errs}), nil
}

// SetNodeAuto sets a node's automatic cordon and drain in the cluster that
// has it.
func (s *nodeService) SetNodeAuto(ctx context.Context, req *connect.Request[unyov1.SetNodeAutoRequest]) (*connect.Response[unyov1.SetNodeAutoResponse], error) {
	found, _, errs, err := forwardNode(ctx, s.r, req.Msg.GetCluster(), req.Msg.GetName(), func(ctx context.Context, c *client.Clients, cluster string) (*unyov1.SetNodeAutoResponse, error) {
		in := proto.CloneOf(req.Msg)
		in.Cluster = cluster
		return msgOf(c.Nodes.SetNodeAuto(ctx, connect.NewRequest(in)))
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.SetNodeAutoResponse{Found: found, ClusterErrors: errs}), nil
}
