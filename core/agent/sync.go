package agent

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/atomicfile"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/limits"
)

// backoff grows a retry delay with jitter, so that a fleet of agents does
// not reconnect to a recovered cluster in lockstep.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// syncLoop registers the node, heartbeats, and refetches the central checks
// whenever the cluster's checks revision moves.
func (a *Agent) syncLoop(ctx context.Context) {
	bo := backoff{min: 500 * time.Millisecond, max: limits.MaxHeartbeatRetry}
	for ctx.Err() == nil {
		if !a.isRegistered() {
			// The first registration waits (briefly) for the providers'
			// first fingerprints, so that the node's first report says
			// whether it can host replicas.
			a.providers.waitFirst(ctx, providersFirstWait)
			if err := a.register(ctx); err != nil {
				if ctx.Err() == nil {
					a.log.Warn("registering with the cluster failed; checks keep running and results are spooled", "cluster", a.opts.ClusterURL, "err", a.cl.Explain(err))
					a.explainRevoked(err)
				}
				ctxwait.Sleep(ctx, bo.next())
				continue
			}
			bo.reset()
		}
		if err := a.beat(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("heartbeat failed", "cluster", a.opts.ClusterURL, "err", a.cl.Explain(err))
			a.explainRevoked(err)
			if connect.CodeOf(err) == connect.CodeNotFound {
				a.setRegistered(false)
				continue
			}
			ctxwait.Sleep(ctx, bo.next())
			continue
		}
		bo.reset()
		a.mu.Lock()
		every := a.heartbeat
		a.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(every):
		case <-a.reregister:
			a.setRegistered(false)
		case <-a.providers.changed:
			// A provider turned healthy or unhealthy (or its capacity
			// moved): the scheduler hears of it now, not a heartbeat later.
		}
	}
}

func (a *Agent) isRegistered() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.registered
}

func (a *Agent) setRegistered(v bool) {
	a.mu.Lock()
	a.registered = v
	a.mu.Unlock()
	a.status.setRegistered(v)
}

func (a *Agent) register(ctx context.Context) error {
	capacity, osName, kernel := Fingerprint(a.fingerprintPath())
	capacity = overrideCapacity(capacity, a.opts.Capacity, false)
	node := &unyov1.Node{
		Name: a.opts.NodeName, Labels: a.opts.Labels, Capacity: capacity,
		Address: a.StatusAddr(), AgentVersion: a.opts.Version, Os: osName, Kernel: kernel,
		RegisteredAt: timestamppb.Now(), Plugins: a.pluginStatusProto(), Providers: a.providers.list(),
		AgentResource: a.opts.Resource, Hostname: hostname(), Serial: hardwareSerial(dmiSerialPath),
	}
	req := &unyov1.RegisterRequest{Node: node}
	var key *ecdsa.PrivateKey
	if a.wantsCertificate() {
		// The key stays here; the cluster signs its public half.
		var err error
		if key, req.Csr, err = identity.NewNodeKey(a.opts.NodeName); err != nil {
			return err
		}
	}
	resp, err := a.cl.Agent.Register(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	if cert := resp.Msg.GetNodeCertificate(); cert != nil && key != nil {
		if err := a.nodeCert.keep(cert, key); err != nil {
			a.log.Error("the node's certificate could not be kept; after a restart an admin must run `unyo nodes delete` before the agent can enrol again", "err", err)
		}
		a.log.Info("enrolled: this node's certificate is kept in the data directory and presented instead of a token from now on", "file", a.nodeCert.path)
		select {
		case a.certChanged <- struct{}{}:
		default:
		}
	}
	a.mu.Lock()
	if d := resp.Msg.GetHeartbeatInterval().AsDuration(); d > 0 {
		a.heartbeat = d
	}
	var kept error
	if tok := resp.Msg.GetNodeToken(); tok != "" {
		kept = a.cred.keep(tok)
	}
	a.mu.Unlock()
	if kept != nil {
		// The credential works for this run; after a restart the join
		// token cannot enrol the node again.
		a.log.Error("the node's credential could not be kept; after a restart an admin must run `unyo nodes delete` before the agent can enrol again", "err", kept)
	} else if resp.Msg.GetNodeToken() != "" {
		a.log.Info("enrolled: this node's own credential is kept in the data directory and used from now on", "file", a.cred.path)
	}
	a.mu.Lock()
	a.clusterName = resp.Msg.GetCluster()
	a.mu.Unlock()
	a.setRegistered(true)
	// A cluster registering the node anew is told them all.
	a.sentPlugins = sentReport[*unyov1.PluginStatus]{}
	a.sentProviders = sentReport[*unyov1.ProviderStatus]{}
	a.log.Info("registered with cluster", "cluster", resp.Msg.GetCluster(), "url", a.opts.ClusterURL)
	return nil
}

func (a *Agent) fingerprintPath() string {
	if a.opts.DataDir != "" {
		return a.opts.DataDir
	}
	return "/"
}

// fullReportEvery is how many heartbeats may say "plugins unchanged" (or
// providers) before one carries them all again: the cluster may have
// failed to record the last list it was sent (it says so in its log and
// keeps the heartbeat), and this bounds how long it holds an old one.
const fullReportEvery = 30

// sentReport is what the heartbeats told the cluster of a list (the
// plugins, the providers), so that a heartbeat carries it only when it
// changed.
type sentReport[T proto.Message] struct {
	last      []T
	unchanged int // heartbeats since the last that carried it
	known     bool
}

// same says whether now is the list last answered and no full report is
// due: the heartbeat then says "unchanged" instead of carrying it.
func (r *sentReport[T]) same(now []T) bool {
	return r.known && r.unchanged < fullReportEvery && slices.EqualFunc(r.last, now, func(a, b T) bool { return proto.Equal(a, b) })
}

// answered records that the cluster took a heartbeat that carried sent
// (unchanged: that said the list was unchanged).
func (r *sentReport[T]) answered(sent []T, unchanged bool) {
	if unchanged {
		r.unchanged++
		return
	}
	r.last, r.unchanged, r.known = sent, 0, true
}

func (a *Agent) beat(ctx context.Context) error {
	req := &unyov1.HeartbeatRequest{Node: a.opts.NodeName}
	plugins, providers := a.pluginStatusProto(), a.providers.list()
	if req.PluginsUnchanged = a.sentPlugins.same(plugins); !req.PluginsUnchanged {
		req.Plugins = plugins
	}
	if req.ProvidersUnchanged = a.sentProviders.same(providers); !req.ProvidersUnchanged {
		req.Providers = providers
	}
	resp, err := a.cl.Agent.Heartbeat(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	a.sentPlugins.answered(plugins, req.PluginsUnchanged)
	a.sentProviders.answered(providers, req.ProvidersUnchanged)
	a.status.heartbeatOK()
	a.mu.Lock()
	changed := resp.Msg.GetChecksRevision() != a.checksRev
	a.mu.Unlock()
	if changed {
		return a.fetchChecks(ctx)
	}
	return nil
}

func (a *Agent) fetchChecks(ctx context.Context) error {
	resp, err := a.cl.Agent.GetChecks(ctx, connect.NewRequest(&unyov1.GetChecksRequest{Node: a.opts.NodeName}))
	if err != nil {
		return fmt.Errorf("fetch checks: %w", err)
	}
	a.setCentral(resp.Msg)
	a.saveCachedChecks(resp.Msg)
	a.log.Info("central checks updated", "revision", resp.Msg.GetRevision(), "checks", len(resp.Msg.GetChecks()))
	return nil
}

func (a *Agent) setCentral(m *unyov1.GetChecksResponse) {
	var defs []checks.Definition
	for _, c := range m.GetChecks() {
		d, err := checks.Compile(c)
		if err != nil {
			a.log.Warn("ignoring a central check this agent cannot run", "check", c.GetName(), "err", err)
			continue
		}
		defs = append(defs, d)
	}
	a.mu.Lock()
	a.centralDefs = defs
	a.checksRev = m.GetRevision()
	a.mu.Unlock()
	a.applyChecks()
}

// The central checks are cached on disk so that an agent restarted while its
// cluster is unreachable goes on running them.
func (a *Agent) cachePath() string { return filepath.Join(a.opts.DataDir, "central-checks.pb") }

func (a *Agent) loadCachedChecks() {
	if a.opts.DataDir == "" {
		return
	}
	data, err := os.ReadFile(a.cachePath())
	if err != nil {
		return
	}
	var m unyov1.GetChecksResponse
	if err := proto.Unmarshal(data, &m); err != nil {
		a.log.Warn("ignoring an unreadable check cache", "file", a.cachePath(), "err", err)
		return
	}
	a.setCentral(&m)
	// Revision 0 makes the first heartbeat refetch whatever changed meanwhile.
	a.mu.Lock()
	a.checksRev = 0
	a.mu.Unlock()
}

func (a *Agent) saveCachedChecks(m *unyov1.GetChecksResponse) {
	if a.opts.DataDir == "" {
		return
	}
	data, err := proto.Marshal(m)
	if err == nil {
		err = atomicfile.WriteFile(a.cachePath(), data, 0o600)
	}
	if err != nil {
		a.log.Warn("could not cache central checks", "file", a.cachePath(), "err", err)
	}
}

// explainRevoked tells the operator what to do when the cluster no longer
// accepts the node's own credential.
func (a *Agent) explainRevoked(err error) {
	a.mu.Lock()
	has, path := a.cred.node != "", a.cred.path
	a.mu.Unlock()
	if a.nodeCert.leaf() != nil {
		has, path = true, a.nodeCert.path
	}
	if has && connect.CodeOf(err) == connect.CodeUnauthenticated {
		a.log.Error("the cluster does not accept this node's credential any more (the node was deleted with `unyo nodes delete`, or the cluster's database was replaced); to enrol the node again, remove the credential file and restart the agent with a join token", "file", path)
	}
}

// hostname is this machine's name, lowercased as node names are; "" when
// unknown.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(h)
}
