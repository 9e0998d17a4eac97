package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/peerwatch"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// Inter-cluster monitoring, the cluster's part. Root assigns each cluster
// the peers it watches and tells it, in the answer to its registration,
// where they answer and the credential to present there, and which
// clusters watch it (the hashes of their credentials, which it keeps and
// accepts: they may call StatusService and nothing else). The replica
// holding the controller lease looks at each peer every interval and
// raises an event about it through ingest (check cluster-peer, node = the
// peer's name), so that rules and alerts apply; every replica answers
// GetStatus with the cluster's health from the shared store, and what the
// controller last saw of its peers, read back from those events.

// peerState is what the cluster knows of inter-cluster monitoring.
type peerState struct {
	mu sync.Mutex
	// assigned are the peers root last told this cluster to watch.
	assigned []*unyov1.PeerAssignment
	// tls verifies the peers' certificates: cluster.root_tls, since root
	// and clusters share a CA in the setups unyo documents.
	tls client.TLSOptions
	// accepted is when this replica last accepted an agent's result (unix
	// nanoseconds), noted in the store by the results-clock component.
	accepted atomic.Int64
}

func (p *peerState) assignment() []*unyov1.PeerAssignment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.assigned
}

// peerObservations is what the controller last saw of each assigned peer:
// its latest cluster-peer event about it.
func (c *Cluster) peerObservations(ctx context.Context) ([]*unyov1.PeerObservation, error) {
	peers := c.peers.assignment()
	if len(peers) == 0 {
		return nil, nil
	}
	events, err := c.store.ListEvents(ctx, store.EventFilter{Check: ingest.PeerCheck})
	if err != nil {
		return nil, fmt.Errorf("read the peers' events: %w", err)
	}
	latest := map[string]*unyov1.Event{}
	for _, e := range events {
		latest[e.GetNode()] = e
	}
	obs := make([]*unyov1.PeerObservation, len(peers))
	for i, p := range peers {
		if e := latest[p.GetName()]; e != nil {
			obs[i] = peerwatch.ObservationOf(e)
			continue
		}
		obs[i] = peerwatch.NewWatch(p.GetName(), time.Now()).Observation(c.opts.Name)
	}
	return obs, nil
}

// keepPeers takes root's answer to a registration: the peers to watch, and
// the watchers whose credentials this cluster accepts from now on (exactly
// those: a watcher root no longer lists is revoked).
func (c *Cluster) keepPeers(ctx context.Context, resp *unyov1.RegisterClusterResponse, rootTLS client.TLSOptions) error {
	c.peers.mu.Lock()
	c.peers.assigned, c.peers.tls = resp.GetPeers(), rootTLS
	c.peers.mu.Unlock()
	have, err := c.store.ListCredentials(ctx, store.CredPeer)
	if err != nil {
		return fmt.Errorf("read the peers' credentials: %w", err)
	}
	want := map[string]string{}
	for _, w := range resp.GetWatchers() {
		want[w.GetName()] = w.GetTokenHash()
	}
	var errs []error
	for _, h := range have {
		if hash, ok := want[h.Name]; ok && hash == h.Hash {
			delete(want, h.Name) // kept as it is
			continue
		} else if ok {
			continue // replaced below
		}
		if err := c.store.DeleteCredential(ctx, store.CredPeer, h.Name); err != nil {
			errs = append(errs, fmt.Errorf("revoke the credential of peer %q: %w", h.Name, err))
		}
		c.auth.Forget(server.KindCluster, h.Name)
	}
	for name, hash := range want {
		if hash == "" {
			continue
		}
		if err := c.store.PutCredential(ctx, store.Credential{Kind: store.CredPeer, Name: name, Hash: hash}); err != nil {
			errs = append(errs, fmt.Errorf("keep the credential of peer %q: %w", name, err))
		}
		c.auth.Forget(server.KindCluster, name)
	}
	return errors.Join(errs...)
}

// health is the cluster's health as its watchers judge it, read from the
// shared store so that every replica answers the same.
func (c *Cluster) health(ctx context.Context) *unyov1.ClusterHealth {
	h := &unyov1.ClusterHealth{}
	var errs []error
	var err error
	h.Peers, err = c.peerObservations(ctx)
	errs = append(errs, err)
	holder, until, err := c.store.LeaseHolder(ctx, c.lease.Name)
	errs = append(errs, err)
	if holder != "" {
		h.LeaseHolder, h.LeaseExpiresAt = holder, timestamppb.New(until)
	}
	now := time.Now()
	lag, err := c.store.PipelineLag(ctx)
	errs = append(errs, err)
	h.PipelineBehind = lag.Behind
	if !lag.OldestReceived.IsZero() {
		h.PipelineLag = durationpb.New(max(now.Sub(lag.OldestReceived), 0))
	}
	accepted, err := c.store.ResultsAcceptedAt(ctx)
	errs = append(errs, err)
	if mine := time.Unix(0, c.peers.accepted.Load()); c.peers.accepted.Load() != 0 && mine.After(accepted) {
		accepted = mine // not noted in the store yet
	}
	if !accepted.IsZero() {
		h.IngestAge = durationpb.New(max(now.Sub(accepted), 0))
	}
	// Whole lists for a count: GetStatus is called every few seconds by
	// a handful of watchers, not per result.
	nodes, err := c.store.ListNodes(ctx)
	errs = append(errs, err)
	checks, err := c.store.ListChecks(ctx)
	errs = append(errs, err)
	h.Nodes, h.Checks = int32(len(nodes)), int32(len(checks))
	if err := errors.Join(errs...); err != nil {
		h.Error = err.Error()
	}
	return h
}

// noteAccepted records that this replica accepted agents' results now.
func (c *Cluster) noteAccepted() { c.peers.accepted.Store(time.Now().UnixNano()) }

// resultsClock notes in the store, every few seconds, when this replica
// last accepted agents' results, so that whichever replica a watcher asks
// tells the cluster's ingest age.
type resultsClock struct {
	c     *Cluster
	noted int64
}

func (r *resultsClock) Run(ctx context.Context) {
	every(ctx, 5*time.Second, func(ctx context.Context) {
		at := r.c.peers.accepted.Load()
		if at == r.noted {
			return
		}
		if err := r.c.store.NoteResultsAccepted(ctx, time.Unix(0, at)); err != nil {
			if ctx.Err() == nil {
				r.c.log.Warn("noting when results were last accepted failed; will retry", "err", err)
			}
			return
		}
		r.noted = at
	})
}

// peerWatcher looks at the peers root assigned this cluster, on the
// replica holding the controller lease, and raises an event about each.
type peerWatcher struct {
	c          *Cluster
	interval   time.Duration
	thresholds peerwatch.Thresholds
	now        func() time.Time
	watches    map[string]*peerwatch.Watch
	clients    map[clientKey]*client.Clients
}

// clientKey names a peer's client: its URL and credential may change.
type clientKey struct{ name, url, token string }

func newPeerWatcher(c *Cluster) *peerWatcher {
	return &peerWatcher{c: c, interval: c.opts.PeerWatch.Interval, thresholds: c.opts.PeerWatch.Thresholds, now: time.Now,
		watches: map[string]*peerwatch.Watch{}, clients: map[clientKey]*client.Clients{}}
}

func (w *peerWatcher) Run(ctx context.Context) { every(ctx, w.interval, w.round) }

// round looks at every assigned peer once, side by side, and raises an
// event about each.
func (w *peerWatcher) round(ctx context.Context) {
	peers := w.c.peers.assignment()
	now := w.now()
	assigned := map[string]bool{}
	for _, p := range peers {
		assigned[p.GetName()] = true
	}
	var events []*unyov1.Event
	for name, pw := range w.watches {
		if assigned[name] {
			continue
		}
		delete(w.watches, name)
		if pw.Last.Status != peerwatch.StatusOK && pw.Last.Status != peerwatch.StatusUnknown {
			// Resolve what this watcher raised, as it will say no more.
			events = append(events, ingest.Synthetic{Node: name, Check: ingest.PeerCheck, Status: unyov1.CheckStatus_CHECK_STATUS_OK, At: now,
				Output: fmt.Sprintf("cluster %s is no longer watched by cluster %s (root assigned it other peers, or the cluster was deleted)", name, w.c.opts.Name),
				Labels: map[string]string{peerwatch.LabelWatcher: w.c.opts.Name}}.Event())
		}
	}
	looks := make([]peerwatch.Look, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		cl, err := w.client(p)
		if err != nil {
			looks[i] = peerwatch.Look{Err: err}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			looks[i] = w.look(ctx, p.GetName(), cl)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the lease was lost or the cluster stops: judge nothing
	}
	for i, p := range peers {
		pw := w.watches[p.GetName()]
		if pw == nil {
			pw = peerwatch.NewWatch(p.GetName(), now)
			w.watches[p.GetName()] = pw
		}
		looks[i].At = now
		v := pw.Observe(looks[i], w.thresholds)
		events = append(events, ingest.Synthetic{Node: p.GetName(), Check: ingest.PeerCheck, Status: v.CheckStatus, At: now, Output: v.Message,
			Labels: pw.Labels(w.c.opts.Name)}.Event())
	}
	if len(events) == 0 {
		return
	}
	if _, err := w.c.ingest.Ingest(ctx, ingest.Batch{Source: ingest.PeerWatch, Events: events}); err != nil && ctx.Err() == nil {
		w.c.log.Warn("recording what this cluster saw of its peers failed", "err", err)
	}
}

// look asks one peer for its status, within the interval.
func (w *peerWatcher) look(ctx context.Context, name string, cl *client.Clients) peerwatch.Look {
	ctx, cancel := context.WithTimeout(ctx, min(w.interval, 10*time.Second))
	defer cancel()
	resp, err := cl.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{}))
	switch {
	case err != nil:
		return peerwatch.Look{Err: cl.Explain(err)}
	case resp.Msg.GetCluster() != name:
		return peerwatch.Look{Err: fmt.Errorf("%s answers as %s %q, not as cluster %q: root has a wrong URL for it", cl.URL, resp.Msg.GetRole(), resp.Msg.GetCluster(), name)}
	}
	return peerwatch.Look{Health: resp.Msg.GetHealth()}
}

// client returns the client for a peer at its URL with its credential.
func (w *peerWatcher) client(p *unyov1.PeerAssignment) (*client.Clients, error) {
	key := clientKey{p.GetName(), p.GetUrl(), p.GetToken()}
	if cl, ok := w.clients[key]; ok {
		return cl, nil
	}
	w.c.peers.mu.Lock()
	tls := w.c.peers.tls
	w.c.peers.mu.Unlock()
	cl, err := client.New(client.Options{URL: p.GetUrl(), Token: p.GetToken(), TLS: tls, Logger: w.c.log,
		Hints: client.Hints{Server: "the peer's URL (its cluster.advertise_url, as root has it)", Token: "the peer credential root hands out", CAFile: "cluster.root_tls.ca_file", TLS: "cluster.root_tls"}})
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", p.GetName(), err)
	}
	for k := range w.clients {
		if k.name == p.GetName() {
			delete(w.clients, k)
		}
	}
	w.clients[key] = cl
	return cl, nil
}
