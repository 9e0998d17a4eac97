package root

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/peerwatch"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// Inter-cluster monitoring, root's part. Root assigns the watchers: the
// clusters sorted by name form a ring, each watching the next
// Options.Peers (peerwatch.Assign), so that with two clusters or more
// every cluster is watched by a peer. A cluster learns its peers (URL and
// the credential to present there) and its watchers (the hashes of their
// credentials) in the answer to each registration, which it repeats, so
// the ring follows clusters that register and are deleted. Each cluster
// has one peer credential, made by root and kept in root's store
// (CredPeerToken); a watched cluster accepts it for StatusService only.
//
// Root also watches every cluster itself, with the same judgement, and
// shows what it and the peers saw in ListClusters. Root has no pipeline:
// its observations are shown, not raised as events; the events come from
// the peers, in their own pipelines.

// PeerWatchOptions configure root's own watching of the clusters.
type PeerWatchOptions struct {
	// Interval between looks at each cluster; default 10s.
	Interval time.Duration
	// Thresholds' zero fields are peerwatch.DefaultThresholds'.
	Thresholds peerwatch.Thresholds
}

// rootWatch is what root saw of every cluster.
type rootWatch struct {
	mu      sync.Mutex
	watches map[string]*peerwatch.Watch
}

// observation returns root's observation of a cluster ("unknown" before
// root looked).
func (w *rootWatch) observation(cluster string) *unyov1.PeerObservation {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.watches[cluster]
	if pw == nil {
		pw = peerwatch.NewWatch(cluster, time.Now())
	}
	return pw.Observation(peerwatch.RootWatcher)
}

// watchLoop looks at every cluster every interval until ctx ends.
func (r *Root) watchLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.PeerWatch.Interval)
	defer t.Stop()
	for {
		r.watchRound(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchRound looks at every cluster once, side by side.
func (r *Root) watchRound(ctx context.Context) {
	all, err := r.store.ListClusters(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("listing the clusters to watch them failed", "err", err)
		}
		return
	}
	now := time.Now()
	answers := askWithin(ctx, r, all, min(r.opts.PeerWatch.Interval, r.opts.ClusterTimeout), func(ctx context.Context, name string, c *client.Clients) (*unyov1.GetStatusResponse, error) {
		resp, err := c.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	})
	if ctx.Err() != nil {
		return
	}
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	listed := map[string]bool{}
	for _, a := range answers {
		listed[a.cluster] = true
		pw := r.watch.watches[a.cluster]
		if pw == nil {
			pw = peerwatch.NewWatch(a.cluster, now)
			r.watch.watches[a.cluster] = pw
		}
		l := peerwatch.Look{At: now, Health: a.value.GetHealth()}
		if a.err != nil {
			l.Err = clusterHints.Explain(a.url, a.err)
		}
		before := pw.Last.Status
		v := pw.Observe(l, r.opts.PeerWatch.Thresholds)
		if v.Status != before && before != peerwatch.StatusUnknown {
			r.log.Info("a cluster's status as root watches it changed", "cluster", a.cluster, "from", before, "to", v.Status, "why", v.Message)
		}
	}
	for name := range r.watch.watches {
		if !listed[name] {
			delete(r.watch.watches, name)
		}
	}
}

// peerToken returns the credential cluster presents to the peers it
// watches, making one if there is none yet.
func (r *Root) peerToken(ctx context.Context, cluster string) (store.Credential, error) {
	cur, err := r.store.GetCredential(ctx, store.CredPeerToken, cluster)
	if err == nil {
		return cur, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.Credential{}, fmt.Errorf("read the peer credential of cluster %q: %w", cluster, err)
	}
	tok, err := identity.NewToken("unyo-peer-")
	if err != nil {
		return store.Credential{}, err
	}
	c := store.Credential{Kind: store.CredPeerToken, Name: cluster, Hash: identity.Hash(tok), Secret: tok}
	err = r.store.AddCredential(ctx, c)
	if errors.Is(err, store.ErrExists) { // made by a concurrent registration
		return r.peerToken(ctx, cluster)
	}
	if err != nil {
		return store.Credential{}, fmt.Errorf("keep the peer credential of cluster %q: %w", cluster, err)
	}
	return c, nil
}

// assignment is the ring of the clusters root knows now.
func (r *Root) assignment(ctx context.Context) (map[string][]string, []*unyov1.ClusterInfo, error) {
	all, err := r.store.ListClusters(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list clusters: %w", err)
	}
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.GetName()
	}
	return peerwatch.Assign(names, r.opts.Peers), all, nil
}

// peersOf fills a registration's answer with the cluster's peers and
// watchers.
func (r *Root) peersOf(ctx context.Context, cluster string, resp *unyov1.RegisterClusterResponse) error {
	assigned, all, err := r.assignment(ctx)
	if err != nil {
		return err
	}
	urls := map[string]string{}
	for _, c := range all {
		urls[c.GetName()] = c.GetUrl()
	}
	if watched := assigned[cluster]; len(watched) > 0 {
		own, err := r.peerToken(ctx, cluster)
		if err != nil {
			return err
		}
		for _, p := range watched {
			resp.Peers = append(resp.Peers, &unyov1.PeerAssignment{Name: p, Url: urls[p], Token: own.Secret})
		}
	}
	for _, w := range peerwatch.WatchersOf(assigned, cluster) {
		cred, err := r.peerToken(ctx, w)
		if err != nil {
			return err
		}
		resp.Watchers = append(resp.Watchers, &unyov1.PeerWatcher{Name: w, TokenHash: cred.Hash})
	}
	return nil
}

// watchedBy fills every cluster's watched_by: root's observation, then
// each assigned peer's, from the statuses the peers answered with. Peers
// outside the caller's cluster scope are left out, as their clusters are.
func (r *Root) watchedBy(ctx context.Context, clusters []*unyov1.ClusterInfo, statuses map[string]*unyov1.GetStatusResponse) {
	names := make([]string, len(clusters))
	for i, c := range clusters {
		names[i] = c.GetName()
	}
	// Every cluster root knows, not only those in the caller's scope, is
	// in the ring.
	assigned, _, err := r.assignment(ctx)
	if err != nil {
		assigned = peerwatch.Assign(names, r.opts.Peers)
	}
	for _, c := range clusters {
		obs := []*unyov1.PeerObservation{r.watch.observation(c.GetName())}
		for _, w := range peerwatch.WatchersOf(assigned, c.GetName()) {
			if !server.PrincipalFrom(ctx).InCluster(w) {
				continue
			}
			st, answered := statuses[w]
			i := slices.IndexFunc(st.GetHealth().GetPeers(), func(o *unyov1.PeerObservation) bool { return o.GetCluster() == c.GetName() })
			switch {
			case i >= 0:
				obs = append(obs, st.GetHealth().GetPeers()[i])
			case answered:
				obs = append(obs, &unyov1.PeerObservation{Cluster: c.GetName(), Watcher: w, Status: peerwatch.StatusUnknown,
					Message: fmt.Sprintf("cluster %s has not looked at it yet (it learns its peers when it registers at root)", w)})
			default:
				obs = append(obs, &unyov1.PeerObservation{Cluster: c.GetName(), Watcher: w, Status: peerwatch.StatusUnknown,
					Message: fmt.Sprintf("cluster %s, which watches it, does not answer root", w)})
			}
		}
		c.WatchedBy = obs
		for _, o := range obs {
			if o.GetLastSeen() != nil && o.GetLastSeen().AsTime().After(c.GetLastSeen().AsTime()) {
				c.LastSeen = o.GetLastSeen()
			}
		}
	}
}
