package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
	"github.com/unyo-ops/unyo/plugins/sdk/sdkconfig"
)

// A load balancer's assignment (Assignment.loadbalancer set) is realized
// through its provider plugin (xdp, vpp) with the config every LB provider
// decodes, plugins/sdk/lb.Config: Create the first time, Update (in place:
// the provider rewrites its maps, established flows keep their backend
// where the hashing allows) when the assignment's generation moved, Delete
// when its desired state is deleted (the generic path). Every
// lbPollInterval the agent Gets each load balancer it runs and reports its
// backends' health and traffic, only when they changed, so that reports
// stay small; a reconcile pass reports what the poller read last (lbKnown)
// and reads a load balancer itself only when the poller has not (after a
// restart, or when it went missing).

// lbPollInterval is how often a load balancer's provider is asked for its
// backends' health and traffic.
const lbPollInterval = 3 * time.Second

// lbTracker is what the agent reported last of each load balancer it runs,
// for the poller.
type lbTracker struct {
	mu      sync.Mutex
	started bool
	last    map[string]*unyov1.AssignmentState
	// watched are the providers whose Watch streams run; kick asks the
	// poller for a round now (a Watch event).
	watched map[string]bool
	kick    chan struct{}
}

// lbConfig is the resource config of a load balancer's assignment.
func lbConfig(a *unyov1.LoadbalancerAssignment) (lb.Config, error) {
	c := lb.Config{VIP: a.GetVip()}
	for _, p := range a.GetPorts() {
		c.Ports = append(c.Ports, lb.Port{Port: int(p.GetPort()), TargetPort: int(p.GetTargetPort()), Protocol: p.GetProtocol()})
	}
	for _, b := range a.GetBackends() {
		c.Backends = append(c.Backends, lb.Backend{Name: b.GetCompute(), Address: b.GetAddress(), Weight: int(b.GetWeight())})
	}
	h := a.GetHealth()
	c.Health = lb.Health{Kind: h.GetKind(), Path: h.GetPath(), Port: int(h.GetPort()), Fall: int(h.GetFall()), Rise: int(h.GetRise())}
	for _, d := range []struct {
		field string
		raw   string
		to    *sdkconfig.Duration
	}{{"health.interval", h.GetInterval(), &c.Health.Interval}, {"health.timeout", h.GetTimeout(), &c.Health.Timeout}} {
		if d.raw == "" {
			continue
		}
		v, err := time.ParseDuration(d.raw)
		if err != nil {
			return lb.Config{}, fmt.Errorf("%s: %w", d.field, err)
		}
		*d.to = sdkconfig.Duration(v)
	}
	return c, c.Validate()
}

// lbStruct is a config as a resource config (its JSON form).
func lbStruct(c lb.Config) (*structpb.Struct, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return structpb.NewStruct(m)
}

// lbKnown is the poller's last state of a load balancer the agent holds at
// the assignment's generation, which a reconcile pass reports without
// asking the provider: the poller reads it every lbPollInterval and at
// each Watch event, and passes come far more often (every long poll's
// answer). It is nil when the pass must go to the provider: not held at
// this generation, not read since the agent started, gone under the agent
// (the poller forgot it), or its last report failed.
func (r *assignmentRunner) lbKnown(as *unyov1.Assignment) *unyov1.AssignmentState {
	r.mu.Lock()
	h := r.held[as.GetCompute()]
	r.mu.Unlock()
	if h == nil || h.Provider != as.GetProvider() || h.Generation != as.GetGeneration() {
		return nil
	}
	r.lbs.mu.Lock()
	defer r.lbs.mu.Unlock()
	last := r.lbs.last[as.GetCompute()]
	if last.GetState() == "" {
		return nil
	}
	return proto.CloneOf(last)
}

// applyLoadbalancer realizes a load balancer's assignment: created when the
// agent holds none, updated in place when the generation moved, only read
// back (Get) otherwise.
func (r *assignmentRunner) applyLoadbalancer(ctx context.Context, as *unyov1.Assignment) *unyov1.AssignmentState {
	name := as.GetCompute()
	st := &unyov1.AssignmentState{Compute: name}
	cfg, err := lbConfig(as.GetLoadbalancer())
	var config *structpb.Struct
	if err == nil {
		config, err = lbStruct(cfg)
	}
	if err != nil {
		st.State, st.Message = stateFailed, fmt.Sprintf("load balancer %s: %v", name, err)
		return st
	}
	r.mu.Lock()
	h := r.held[name]
	r.mu.Unlock()
	labels := map[string]string{LabelCluster: r.cluster(), LabelNode: r.node, LabelCompute: name, LabelService: as.GetService()}
	var res *pluginv1.Resource
	err = r.do(ctx, as.GetProvider(), func(ctx context.Context, c *base.Conn) error {
		switch {
		case h != nil && h.Provider == as.GetProvider() && h.Generation == as.GetGeneration():
			resp, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: name})
			if grpcstatus.Code(err) != codes.NotFound {
				res = resp.GetResource()
				return err
			}
			// Gone under the agent: made again below.
		case h != nil && h.Provider == as.GetProvider():
			resp, err := c.Provider.Update(ctx, &pluginv1.UpdateRequest{Id: name, Config: config})
			if grpcstatus.Code(err) != codes.NotFound {
				res = resp.GetResource()
				if err == nil {
					r.log.Info("load balancer updated in place", "loadbalancer", name, "generation", as.GetGeneration(), "backends", len(cfg.Backends))
				}
				return err
			}
		}
		resp, err := c.Provider.Create(ctx, &pluginv1.CreateRequest{Id: name, Labels: labels, Config: config})
		res = resp.GetResource()
		if err == nil {
			r.log.Info("load balancer created", "loadbalancer", name, "vip", cfg.VIP, "backends", len(cfg.Backends))
		}
		return err
	})
	if err != nil {
		st.State, st.Message = stateFailed, fmt.Sprintf("provider %s: %v", as.GetProvider(), err)
		return st
	}
	hd := res.GetHandle()
	r.mu.Lock()
	r.held[name] = &heldResource{Compute: name, Provider: as.GetProvider(), Generation: as.GetGeneration(),
		HandleVersion: hd.GetVersion(), HandleDriver: hd.GetDriver(), HandleState: hd.GetState()}
	r.mu.Unlock()
	st = lbState(as.GetProvider(), name, res)
	r.lbs.mu.Lock()
	if r.lbs.last == nil {
		r.lbs.last = map[string]*unyov1.AssignmentState{}
	}
	r.lbs.last[name] = proto.CloneOf(st)
	start := !r.lbs.started
	r.lbs.started = true
	if r.lbs.kick == nil {
		r.lbs.kick, r.lbs.watched = make(chan struct{}, 1), map[string]bool{}
	}
	watch := !r.lbs.watched[as.GetProvider()]
	r.lbs.watched[as.GetProvider()] = true
	r.lbs.mu.Unlock()
	if start {
		go r.pollLoadbalancers(ctx)
	}
	if watch {
		go r.watchProvider(ctx, as.GetProvider())
	}
	return st
}

// lbState is a load balancer's state as its provider reports it: the
// resource's state, its backends' health and traffic, and the VIP's
// traffic (the sum over its backends).
func lbState(provider, name string, res *pluginv1.Resource) *unyov1.AssignmentState {
	st := resourceState(&unyov1.Assignment{Compute: name, Provider: provider}, res)
	for _, b := range res.GetBackends() {
		st.Backends = append(st.Backends, &unyov1.LoadbalancerBackendStatus{Compute: b.GetName(), Address: b.GetAddress(),
			Healthy: b.GetHealthy(), Reason: b.GetReason(), Packets: b.GetPackets(), Bytes: b.GetBytes(), Since: b.GetSince()})
		st.Packets += b.GetPackets()
		st.Bytes += b.GetBytes()
	}
	slices.SortFunc(st.Backends, func(a, b *unyov1.LoadbalancerBackendStatus) int {
		return strings.Compare(a.GetCompute(), b.GetCompute())
	})
	return st
}

// pollLoadbalancers reads every load balancer the agent runs every
// lbPollInterval and reports those whose backends' health or traffic
// changed. A load balancer the agent no longer holds (deleted, or a stray
// removed) is forgotten.
func (r *assignmentRunner) pollLoadbalancers(ctx context.Context) {
	t := time.NewTicker(lbPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.lbs.kick:
		}
		r.lbs.mu.Lock()
		names := make([]string, 0, len(r.lbs.last))
		for name := range r.lbs.last {
			names = append(names, name)
		}
		r.lbs.mu.Unlock()
		var states []*unyov1.AssignmentState
		for _, name := range names {
			if st := r.pollLoadbalancer(ctx, name); st != nil {
				states = append(states, st)
			}
		}
		if len(states) == 0 {
			continue
		}
		_, err := r.api.ReportAssignments(ctx, connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: r.node, States: states}))
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("reporting load balancers' health failed; will retry", "err", r.explain(err))
			}
			// Report them again next time.
			r.lbs.mu.Lock()
			for _, st := range states {
				if r.lbs.last[st.GetCompute()] != nil {
					r.lbs.last[st.GetCompute()] = &unyov1.AssignmentState{}
				}
			}
			r.lbs.mu.Unlock()
		}
	}
}

// lbWatchRetry is how long a broken Watch stream waits to start again.
const lbWatchRetry = 5 * time.Second

// watchProvider follows a load-balancer provider's Watch stream and asks
// the poller for a round at each event (a backend's health changed, a
// resource failed), so that reports need not wait for the next poll. A
// provider without Watch is only polled.
func (r *assignmentRunner) watchProvider(ctx context.Context, provider string) {
	for {
		err := r.do(ctx, provider, func(ctx context.Context, c *base.Conn) error {
			stream, err := c.Provider.Watch(ctx, &pluginv1.WatchRequest{})
			if err != nil {
				return err
			}
			for {
				if _, err := stream.Recv(); err != nil {
					return err
				}
				select {
				case r.lbs.kick <- struct{}{}:
				default: // a round is pending already
				}
			}
		})
		if grpcstatus.Code(err) == codes.Unimplemented {
			r.log.Debug("a load-balancer provider has no Watch; it is polled", "provider", provider)
			return
		}
		if !ctxwait.Sleep(ctx, lbWatchRetry) {
			return
		}
	}
}

// pollLoadbalancer reads one load balancer; it returns its state to
// report, or nil when nothing changed since the last report.
func (r *assignmentRunner) pollLoadbalancer(ctx context.Context, name string) *unyov1.AssignmentState {
	r.mu.Lock()
	h := r.held[name]
	r.mu.Unlock()
	forget := func() {
		r.lbs.mu.Lock()
		delete(r.lbs.last, name)
		r.lbs.mu.Unlock()
	}
	if h == nil {
		forget()
		return nil
	}
	var res *pluginv1.Resource
	err := r.do(ctx, h.Provider, func(ctx context.Context, c *base.Conn) error {
		resp, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: name})
		res = resp.GetResource()
		return err
	})
	switch {
	case grpcstatus.Code(err) == codes.NotFound:
		forget()
		return nil
	case err != nil:
		r.log.Debug("reading a load balancer failed", "loadbalancer", name, "err", err)
		return nil
	}
	st := lbState(h.Provider, name, res)
	st.Generation = h.Generation
	r.lbs.mu.Lock()
	defer r.lbs.mu.Unlock()
	last, ok := r.lbs.last[name]
	if !ok || sameLBState(last, st) {
		return nil
	}
	r.lbs.last[name] = proto.CloneOf(st)
	st.UpdatedAt = timestamppb.Now()
	return st
}

// sameLBState compares two reports but for when they were made.
func sameLBState(a, b *unyov1.AssignmentState) bool {
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	a.UpdatedAt, b.UpdatedAt, a.Generation, b.Generation = nil, nil, 0, 0
	return proto.Equal(a, b)
}
