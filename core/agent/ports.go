package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/unyo-ops/unyo/core/agent/metadata"
	"github.com/unyo-ops/unyo/core/agent/portnet"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// PortOptions turn on the agent's per-port network namespaces (agent.ports).
type PortOptions struct {
	// Enabled: each assignment with an address and a link address gets
	// its port namespace (core/agent/portnet) and metadata endpoint.
	Enabled bool
	// MetadataPort is where the metadata endpoint answers on 169.254.1.2
	// (default 80).
	MetadataPort int
}

// portCheckInterval is how often the agent looks for ports to attach (a
// container that was just created or restarted into a new namespace).
const portCheckInterval = time.Second

// portRunner wires the node's compute ports: the assignment runner calls
// facts (before a provider's Create: the namespace must exist for a
// process to run in it) and update (with every assignment list); its own
// loop attaches each port's compute link once the provider reports where
// the compute is, and serves each port's metadata endpoint.
type portRunner struct {
	a    *Agent
	m    *portnet.Manager
	log  *slog.Logger
	port int
	kick chan struct{}
	// ensureMu makes one Ensure at a time: the assignment runner's Create
	// (facts) and this loop's attach ensure the same port side by side, and
	// two creating one namespace collide ("file exists") half way.
	ensureMu sync.Mutex

	mu      sync.Mutex
	want    map[string]*unyov1.Assignment
	servers map[string]*http.Server
	// lastErr is the last attach error of each port (logged once).
	lastErr map[string]string
}

func newPortRunner(a *Agent) (*portRunner, error) {
	m, err := portnet.New(a.opts.NodeName, netns.None())
	if err != nil {
		return nil, err
	}
	port := a.opts.Ports.MetadataPort
	if port == 0 {
		port = 80
	}
	return &portRunner{a: a, m: m, log: a.log.With("part", "ports"), port: port, kick: make(chan struct{}, 1),
		servers: map[string]*http.Server{}, lastErr: map[string]string{}}, nil
}

// hasPort says whether an assignment is a compute port: it has its
// address and its link address (a load balancer has none).
func hasPort(as *unyov1.Assignment) bool {
	return as.GetLinkAddress() != "" && as.GetAddress() != "" && as.GetLoadbalancer() == nil
}

func portOf(as *unyov1.Assignment) (portnet.Port, error) {
	p := portnet.Port{Compute: as.GetCompute()}
	var err error
	if p.Link, err = netip.ParseAddr(as.GetLinkAddress()); err != nil {
		return p, fmt.Errorf("port of %s: link address: %w", as.GetCompute(), err)
	}
	addr := as.GetAddress()
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	if p.Address, err = netip.ParseAddr(addr); err != nil {
		return p, fmt.Errorf("port of %s: address: %w", as.GetCompute(), err)
	}
	return p, nil
}

// facts makes the assignment's port namespace and adds its path to f
// (under "netns": provider-exec runs the command in it, provider-docker
// leaves the container's network to the agent). A port that cannot be
// made (a foreign namespace of its name) fails the Create.
func (p *portRunner) facts(as *unyov1.Assignment, f map[string]any) (map[string]any, error) {
	if p == nil || !hasPort(as) || as.GetDesired() == desiredDeleted {
		return f, nil
	}
	port, err := portOf(as)
	if err == nil {
		err = p.ensure(port)
	}
	if err != nil {
		return nil, err
	}
	f["netns"] = p.m.Path(as.GetCompute())
	return f, nil
}

func (p *portRunner) ensure(port portnet.Port) error {
	p.ensureMu.Lock()
	defer p.ensureMu.Unlock()
	return p.m.Ensure(port)
}

// update takes the node's whole assignment list: ports of computes no
// longer wanted are removed (on the agent's first list, also those left
// from before a restart), the others are attached by the loop.
func (p *portRunner) update(as []*unyov1.Assignment) {
	if p == nil {
		return
	}
	want := map[string]*unyov1.Assignment{}
	for _, a := range as {
		if a.GetDesired() != desiredDeleted && hasPort(a) {
			want[a.GetCompute()] = a
		}
	}
	p.mu.Lock()
	p.want = want
	var stop []*http.Server
	for c, srv := range p.servers {
		if want[c] == nil {
			stop = append(stop, srv)
			delete(p.servers, c)
		}
	}
	p.mu.Unlock()
	// The endpoints' sockets hold their namespaces: closed first.
	for _, srv := range stop {
		_ = srv.Close()
	}
	keep := map[string]bool{}
	for c := range want {
		keep[c] = true
	}
	removed, err := p.m.Prune(keep)
	for _, n := range removed {
		p.log.Info("port namespace removed", "namespace", n)
	}
	if err != nil {
		p.log.Warn("removing port namespaces failed", "err", err)
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *portRunner) run(ctx context.Context) {
	defer p.m.Close()
	t := time.NewTicker(portCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The ports stay (their computes run on); their endpoints
			// answer again once the agent is back.
			p.mu.Lock()
			for c, srv := range p.servers {
				_ = srv.Close()
				delete(p.servers, c)
			}
			p.mu.Unlock()
			return
		case <-p.kick:
		case <-t.C:
		}
		p.mu.Lock()
		want := make([]*unyov1.Assignment, 0, len(p.want))
		for _, a := range p.want {
			want = append(want, a)
		}
		p.mu.Unlock()
		for _, a := range want {
			err := p.attach(ctx, a)
			p.mu.Lock()
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			changed := p.lastErr[a.GetCompute()] != msg
			p.lastErr[a.GetCompute()] = msg
			p.mu.Unlock()
			if err != nil && changed && ctx.Err() == nil {
				p.log.Warn("wiring a port failed; will retry", "compute", a.GetCompute(), "err", err)
			}
		}
	}
}

// errNotYet is a port whose compute is not running yet.
var errNotYet = errors.New("not running yet")

// attach gives the port its compute link (from where the provider says
// the compute is) and starts its metadata endpoint.
func (p *portRunner) attach(ctx context.Context, as *unyov1.Assignment) error {
	port, err := portOf(as)
	if err != nil {
		return err
	}
	how := p.m.Attached(port)
	if how == portnet.NotAttached {
		if err := p.ensure(port); err != nil {
			return err
		}
		res, err := p.resource(ctx, as)
		if err != nil {
			return err
		}
		if res.GetState() != pluginv1.ResourceState_RESOURCE_STATE_RUNNING {
			return nil
		}
		attrs := res.GetAttributes()
		switch how = portnet.LinkAttached; {
		case attrs["netns"] != "":
			err = p.m.Attach(port, attrs["netns"])
		case attrs["tap"] != "":
			err = p.m.AttachTap(port, attrs["tap"])
		default:
			// The process runs in the port namespace itself.
			how = portnet.LocalAttached
			err = p.m.AttachLocal(port)
		}
		if err != nil {
			return err
		}
		p.log.Info("port wired", "compute", as.GetCompute(), "address", port.Address, "link", port.Link, "namespace", p.m.Name(as.GetCompute()))
	}
	return p.serve(as, port, how == portnet.LocalAttached)
}

func (p *portRunner) resource(ctx context.Context, as *unyov1.Assignment) (*pluginv1.Resource, error) {
	pl, err := p.a.plugins.Plugin(providerKind, as.GetProvider())
	if err != nil {
		return nil, fmt.Errorf("provider %q: %w", as.GetProvider(), err)
	}
	var res *pluginv1.Resource
	err = pl.Do(ctx, func(ctx context.Context, c *base.Conn) error {
		resp, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: as.GetCompute()})
		res = resp.GetResource()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("where compute %s runs (provider %s): %w", as.GetCompute(), as.GetProvider(), err)
	}
	return res, nil
}

// serve starts the port's metadata endpoint unless it runs.
func (p *portRunner) serve(as *unyov1.Assignment, port portnet.Port, local bool) error {
	p.mu.Lock()
	_, running := p.servers[as.GetCompute()]
	p.mu.Unlock()
	if running {
		return nil
	}
	hostPort := net.JoinHostPort(portnet.Metadata.String(), strconv.Itoa(p.port))
	info := metadata.Info{Compute: as.GetCompute(), Service: as.GetService(), Node: p.a.nodeName(), Cluster: p.a.cluster(),
		Addresses: []string{port.Address.String()}, LinkAddress: port.Link.String(), Gateway: portnet.Gateway.String(),
		ClusterURL: "http://" + hostPort + strings.TrimSuffix(metadata.ProxyPath, "/"), JoinToken: p.a.computeToken(as.GetCompute())}
	proxy, err := p.a.computeProxy(as.GetCompute())
	if err != nil {
		return err
	}
	from := []netip.Addr{port.Address}
	if local {
		// A process in the port namespace connects from a local address.
		from = append(from, portnet.Metadata)
	}
	l, err := p.m.Listen(as.GetCompute(), hostPort)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: metadata.New(info, from, proxy), ReadHeaderTimeout: 10 * time.Second}
	p.mu.Lock()
	p.servers[as.GetCompute()] = srv
	p.mu.Unlock()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Warn("a port's metadata endpoint stopped", "compute", as.GetCompute(), "err", err)
		}
	}()
	return nil
}
