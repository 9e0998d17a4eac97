// Command unyo-provider-vpp realizes load balancers (resource type
// "loadbalancer", config plugins/sdk/lb.Config) in VPP's lb plugin over
// its binary API socket with govpp: one VIP per port and protocol
// (lb_add_del_vip), the healthy backends as its application servers
// (lb_add_del_as), lb_conf once per connection when a source address or
// flow timeout is configured.
//
// What is wanted lives in the state directory (one record per resource);
// what is applied lives in VPP and is read back with lb_vip_dump and
// lb_as_dump. Every change reconciles the two under the directory's lock:
// VPP's table is diffed against the union of the records (resources may
// share a VIP), only the records' VIPs are touched, and backends leave
// with flush=false so their established flows drain as VPP does. A
// background pass repeats the reconciliation, so a restarted VPP (empty
// tables) is refilled.
package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/lb_types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
	"github.com/unyo-ops/unyo/plugins/sdk"
	sdklb "github.com/unyo-ops/unyo/plugins/sdk/lb"
)

const (
	version = "1.0.0"
	name    = "vpp"
	// handleVersion is the layout of Handle.State.
	handleVersion = 1
	// DefaultSocket is where VPP's api socket usually is
	// (socksvr { default } in startup.conf).
	DefaultSocket = "/run/vpp/api.sock"
	// defaultResync is how often the tables are reconciled without a
	// change, to refill a VPP that restarted.
	defaultResync = 5 * time.Second
	// watchPoll is how often Watch looks at its resources.
	watchPoll = 500 * time.Millisecond
)

// Config is plugin-wide.
type Config struct {
	Socket   string `json:"socket,omitempty"`
	StateDir string `json:"state_dir"`
	// SrcAddress is lb_conf's ip4_src_address: the source of the GRE
	// packets to the backends (and of L3DSR's). Empty sends no lb_conf:
	// VPP keeps what its startup config or CLI set.
	SrcAddress string `json:"src_address,omitempty"`
	// Encap is gre4, l3dsr or nat4.
	Encap string `json:"encap,omitempty"`
	// Dscp marks L3DSR packets (0-63).
	Dscp int `json:"dscp,omitempty"`
	// FlowTimeout is lb_conf's flow_timeout: how long a flow sticks to
	// its backend after its last packet, and so how long a removed
	// backend keeps its established flows. 0 keeps VPP's (40 s).
	FlowTimeout sdk.Duration `json:"flow_timeout,omitempty"`
	// ResyncInterval is how often VPP's table is reconciled unasked.
	ResyncInterval sdk.Duration `json:"resync_interval,omitempty"`
	// MaxDrain bounds how long Delete drains (its grace otherwise);
	// absent means defaultMaxDrain, 0 deletes at once.
	MaxDrain *sdk.Duration `json:"max_drain,omitempty"`
}

// defaultMaxDrain bounds a Delete's drain when max_drain is not set.
const defaultMaxDrain = 30 * time.Second

var encaps = map[string]lb_types.LbEncapType{
	"gre4":  lb_types.LB_API_ENCAP_TYPE_GRE4,
	"l3dsr": lb_types.LB_API_ENCAP_TYPE_L3DSR,
	"nat4":  lb_types.LB_API_ENCAP_TYPE_NAT4,
}

type vppProvider struct {
	mu     sync.Mutex
	cfg    Config
	encap  lb_types.LbEncapType
	st     store
	vpp    *vppClient
	health healthTable
	// stop ends the background loops of the current config.
	stop   context.CancelFunc
	loops  sync.WaitGroup
	checks map[string]context.CancelFunc
	bg     context.Context
}

func (*vppProvider) Info() sdk.Info {
	return sdk.Info{Name: name, Version: version, Description: "load balancers in VPP's lb plugin over its binary API (govpp)"}
}

func (*vppProvider) ConfigSchema() string {
	return `{"type":"object","required":["state_dir"],"additionalProperties":false,"properties":{` +
		`"socket":{"type":"string","default":"` + DefaultSocket + `"},` +
		`"state_dir":{"type":"string","minLength":1},` +
		`"src_address":{"type":"string"},` +
		`"encap":{"enum":["gre4","l3dsr","nat4"],"default":"gre4"},` +
		`"dscp":{"type":"integer","minimum":0,"maximum":63},` +
		`"flow_timeout":{"type":["string","number"]},` +
		`"resync_interval":{"type":["string","number"]},` +
		`"max_drain":{"type":["string","number"]}}}`
}

func (p *vppProvider) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.Socket == "" {
		cfg.Socket = DefaultSocket
	}
	if cfg.Encap == "" {
		cfg.Encap = "gre4"
	}
	encap, ok := encaps[cfg.Encap]
	if !ok {
		return sdk.Invalid("encap", "must be gre4, l3dsr or nat4, not %q", cfg.Encap)
	}
	if cfg.StateDir == "" || !filepath.IsAbs(cfg.StateDir) {
		return sdk.Invalid("state_dir", "must be an absolute path (a directory that survives plugin restarts), not %q", cfg.StateDir)
	}
	if cfg.Dscp < 0 || cfg.Dscp > 63 {
		return sdk.Invalid("dscp", "must be 0-63, not %d", cfg.Dscp)
	}
	var conf *lb.LbConf
	if cfg.SrcAddress != "" || cfg.FlowTimeout > 0 {
		// ~0 keeps VPP's current value.
		conf = &lb.LbConf{StickyBucketsPerCore: ^uint32(0), FlowTimeout: ^uint32(0)}
		if cfg.SrcAddress != "" {
			a, err := netip.ParseAddr(cfg.SrcAddress)
			if err != nil || !a.Is4() {
				return sdk.Invalid("src_address", "must be an IPv4 address, not %q", cfg.SrcAddress)
			}
			conf.IP4SrcAddress = a.As4()
		}
		if cfg.FlowTimeout > 0 {
			conf.FlowTimeout = uint32(max(time.Duration(cfg.FlowTimeout)/time.Second, 1))
		}
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = sdk.Duration(defaultResync)
	}
	if cfg.MaxDrain == nil {
		d := sdk.Duration(defaultMaxDrain)
		cfg.MaxDrain = &d
	}
	if err := mkdirAll(cfg.StateDir); err != nil {
		return sdk.Invalid("state_dir", "cannot be created: %v", err)
	}
	p.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg, p.encap, p.st = cfg, encap, store{dir: cfg.StateDir}
	p.vpp = &vppClient{socket: cfg.Socket, conf: conf}
	bg, stop := context.WithCancel(context.Background())
	p.bg, p.stop, p.checks = bg, stop, map[string]context.CancelFunc{}
	p.loops.Add(1)
	go p.resyncLoop(bg, time.Duration(cfg.ResyncInterval))
	return nil
}

// close stops the loops of the current config.
func (p *vppProvider) close() {
	p.mu.Lock()
	stop, client := p.stop, p.vpp
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
	p.loops.Wait()
	if client != nil {
		client.Close()
	}
}

func (p *vppProvider) Close(context.Context) error {
	p.close()
	return nil
}

func (p *vppProvider) Probe(context.Context) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.vpp == nil {
		return false, "not configured"
	}
	return true, ""
}

// current returns the config's parts under the lock.
func (p *vppProvider) current() (store, *vppClient, lb_types.LbEncapType, uint8, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.vpp == nil {
		return store{}, nil, 0, 0, status.Error(codes.FailedPrecondition, "provider vpp is not configured")
	}
	return p.st, p.vpp, p.encap, uint8(p.cfg.Dscp), nil
}

func (*vppProvider) ResourceType() string   { return "loadbalancer" }
func (*vppProvider) ResourceSchema() string { return sdklb.Schema }

func (p *vppProvider) Validate(_ context.Context, config map[string]any) error {
	c, err := sdklb.Decode(config)
	if err != nil {
		return err
	}
	p.mu.Lock()
	encap := p.cfg.Encap
	p.mu.Unlock()
	if encap != "nat4" {
		for i, port := range c.Ports {
			if port.Target() != port.Port {
				return sdk.Invalid(fmt.Sprintf("ports[%d].target_port", i),
					"is %d but the port is %d: encap %s delivers the packet unchanged, only encap nat4 translates ports", port.TargetPort, port.Port, orGre4(encap))
			}
		}
	}
	return nil
}

func orGre4(s string) string {
	if s == "" {
		return "gre4"
	}
	return s
}

// wantedOf is what one record asks of VPP now: its VIPs and its healthy
// backends.
func (p *vppProvider) wantedOf(r record, encap lb_types.LbEncapType, dscp uint8) (wanted, error) {
	c, err := sdklb.Decode(r.Config)
	if err != nil {
		return wanted{}, fmt.Errorf("provider vpp: resource %s has a config this plugin cannot read: %w", r.ID, err)
	}
	w := wanted{ID: r.ID, VIPs: resourceVIPs(c, encap, dscp)}
	if !r.DrainUntil.IsZero() {
		return w, nil // being deleted: no new flows, the VIP stays for the established ones
	}
	none := c.Health.Kind == "none"
	for _, b := range c.Backends {
		a := netip.MustParseAddr(b.Address)
		if none || p.health.get(r.ID, a, r.CreatedAt).Healthy {
			w.ASes = append(w.ASes, a)
		}
	}
	return w, nil
}

// reconcile makes VPP's table what the records want, with change applied
// to the records first (under the store's lock, so that no other instance
// reconciles in between): put adds or replaces a record, del removes one.
// The VIPs of a removed or replaced record that no other record uses are
// deleted. When VPP refuses, the records are left as they were and VPP is
// reconciled back to them.
func (p *vppProvider) reconcile(ctx context.Context, put *record, del string) error {
	st, client, encap, dscp, err := p.current()
	if err != nil {
		return err
	}
	unlock, err := st.lock()
	if err != nil {
		return err
	}
	defer unlock()
	recs, err := st.all()
	if err != nil {
		return err
	}
	before := recs
	// owned: the VIPs of the records this change replaces or removes;
	// undo also owns the VIPs the new record brought. recreate: the VIPs
	// whose spec the change alters.
	owned, undoOwned, recreate := map[vppaddr.VIPKey]bool{}, map[vppaddr.VIPKey]bool{}, map[vppaddr.VIPKey]bool{}
	oldSpecs := map[vppaddr.VIPKey]vipSpec{}
	var after []record
	for _, r := range recs {
		if (put != nil && r.ID == put.ID) || r.ID == del {
			// Its VIPs are ours to remove if nobody else wants them.
			for _, s := range p.specsOf(r, encap, dscp) {
				owned[s.Key], oldSpecs[s.Key] = true, s
			}
			continue
		}
		after = append(after, r)
	}
	if put != nil {
		after = append(after, *put)
		for _, s := range p.specsOf(*put, encap, dscp) {
			undoOwned[s.Key] = true
			if old, ok := oldSpecs[s.Key]; ok && old != s {
				recreate[s.Key] = true
			}
		}
	}
	maps.Copy(undoOwned, owned)
	err = p.applyRecords(ctx, client, after, owned, recreate, encap, dscp)
	if err == nil {
		switch {
		case put != nil:
			err = st.put(*put)
		case del != "":
			err = st.remove(del)
		}
		if err == nil {
			return nil
		}
	}
	if put == nil && del == "" {
		return err
	}
	// Undo: VPP back to the records as they are.
	if uerr := p.applyRecords(ctx, client, before, undoOwned, recreate, encap, dscp); uerr != nil {
		sdk.Log(ctx).Warn("undoing a failed change", "error", uerr)
	}
	return err
}

// specsOf is the VIPs a record asks for; none for a config this plugin
// cannot read.
func (p *vppProvider) specsOf(r record, encap lb_types.LbEncapType, dscp uint8) []vipSpec {
	c, err := sdklb.Decode(r.Config)
	if err != nil {
		return nil
	}
	return resourceVIPs(c, encap, dscp)
}

func (p *vppProvider) applyRecords(ctx context.Context, client *vppClient, recs []record, owned, recreate map[vppaddr.VIPKey]bool, encap lb_types.LbEncapType, dscp uint8) error {
	owned = maps.Clone(owned)
	var ws []wanted
	for _, r := range recs {
		w, err := p.wantedOf(r, encap, dscp)
		if err != nil {
			return err
		}
		ws = append(ws, w)
		for _, s := range w.VIPs {
			owned[s.Key] = true
		}
	}
	want, err := merge(ws)
	if err != nil {
		return status.Error(codes.FailedPrecondition, "provider vpp: "+err.Error())
	}
	have, err := client.table(ctx)
	if err != nil {
		return err
	}
	return client.apply(ctx, plan(want, have, owned, recreate))
}

// resyncLoop reconciles periodically and keeps one health-check loop per
// resource.
func (p *vppProvider) resyncLoop(ctx context.Context, every time.Duration) {
	defer p.loops.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.syncChecks(ctx)
		if err := p.reconcile(ctx, nil, ""); err != nil && ctx.Err() == nil {
			sdk.Log(ctx).Debug("resync", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncChecks starts a health-check loop for each record without one and
// stops those of records gone.
func (p *vppProvider) syncChecks(ctx context.Context) {
	st, _, _, _, err := p.current()
	if err != nil {
		return
	}
	recs, err := st.all()
	if err != nil {
		return
	}
	ids := map[string]bool{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range recs {
		ids[r.ID] = true
		if _, ok := p.checks[r.ID]; !ok && ctx.Err() == nil {
			cctx, cancel := context.WithCancel(ctx)
			p.checks[r.ID] = cancel
			p.loops.Add(1)
			go p.checkLoop(cctx, r.ID)
		}
	}
	for id, cancel := range p.checks {
		if !ids[id] {
			cancel()
			delete(p.checks, id)
			p.health.retain(id, nil)
		}
	}
}

// checkLoop checks one resource's backends every interval (re-reading its
// record, so updates apply) and reconciles when one changes rotation.
func (p *vppProvider) checkLoop(ctx context.Context, id string) {
	defer p.loops.Done()
	for {
		st, _, _, _, err := p.current()
		if err != nil {
			return
		}
		r, err := st.get(id)
		if err != nil {
			return // deleted: syncChecks forgets it
		}
		c, err := sdklb.Decode(r.Config)
		if err != nil {
			return
		}
		hc := c.Health.WithDefaults(c.Ports[0])
		if hc.Kind != "none" {
			if p.checkOnce(ctx, r, c, hc) {
				if err := p.reconcile(ctx, nil, ""); err != nil && ctx.Err() == nil {
					sdk.Log(ctx).Warn("applying a backend's health", "resource", id, "error", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(hc.Interval)):
		}
	}
}

// checkOnce probes every backend of r in parallel and says whether any
// changed health.
func (p *vppProvider) checkOnce(ctx context.Context, r record, c sdklb.Config, hc sdklb.Health) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	changed := false
	keep := map[netip.Addr]bool{}
	for _, b := range c.Backends {
		a := netip.MustParseAddr(b.Address)
		keep[a] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := sdklb.Probe(ctx, nil, hc, a)
			if ctx.Err() != nil {
				return
			}
			if p.health.observe(r.ID, a, err, time.Now(), r.CreatedAt, hc) {
				sdk.Log(ctx).Info("backend health changed", "resource", r.ID, "backend", a.String(), "error", err)
				mu.Lock()
				changed = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.health.retain(r.ID, keep)
	return changed
}

// handleState is Handle.State: enough to find the record again.
type handleState struct {
	ID  string `json:"id"`
	VIP string `json:"vip"`
}

// resource builds the answer for one record from VPP's table.
func (p *vppProvider) resource(r record, have map[vppaddr.VIPKey]*haveVIP, encap lb_types.LbEncapType, dscp uint8, socket string) sdk.Resource {
	c, err := sdklb.Decode(r.Config)
	out := sdk.Resource{ID: r.ID, Labels: r.Labels, Config: r.Config, CreatedAt: r.CreatedAt}
	out.Handle = sdk.NewHandle(handleVersion, handleState{ID: r.ID, VIP: c.VIP})
	if err != nil {
		out.State, out.Reason = sdk.Broken, err.Error()
		return out
	}
	out.Attributes = map[string]string{"vip": c.VIP, "socket": socket, "encap": orGre4(p.encapName())}
	specs := resourceVIPs(c, encap, dscp)
	var missing []string
	inUse := map[netip.Addr]bool{}
	for _, s := range specs {
		v := have[s.Key]
		if v == nil { // by key only: see plan
			missing = append(missing, s.Key.String())
			continue
		}
		for a, used := range v.ASes {
			if used {
				inUse[a] = true
			}
		}
	}
	healthy := 0
	for _, b := range c.Backends {
		a := netip.MustParseAddr(b.Address)
		bh := p.health.get(r.ID, a, r.CreatedAt)
		if c.Health.Kind == "none" {
			bh = backendHealth{Healthy: true, Since: r.CreatedAt}
		}
		bs := &pluginv1.BackendStatus{Address: b.Address, Name: b.Name, Healthy: bh.Healthy, Reason: bh.Reason, Since: timestamppb.New(bh.Since)}
		if bh.Healthy {
			healthy++
			if !inUse[a] && len(missing) == 0 && r.DrainUntil.IsZero() {
				bs.Reason = "healthy but not yet in VPP's rotation"
			}
		}
		out.Backends = append(out.Backends, bs)
	}
	switch {
	case !r.DrainUntil.IsZero():
		out.State = sdk.Running
		out.Reason = fmt.Sprintf("being deleted: no new flows, established ones drain until %s", r.DrainUntil.Format(time.RFC3339))
	case len(missing) > 0:
		out.State = sdk.Broken
		out.Reason = fmt.Sprintf("VPP lacks VIP %s (restarted, or changed by someone else); the plugin re-adds it within %s",
			strings.Join(missing, ", "), time.Duration(p.resyncEvery()))
	case len(c.Backends) > 0 && healthy == 0:
		out.State, out.Reason = sdk.Running, "no healthy backend: new flows to the VIP are dropped"
	default:
		out.State = sdk.Running
		if healthy < len(c.Backends) {
			out.Reason = fmt.Sprintf("%d of %d backends healthy", healthy, len(c.Backends))
		}
	}
	return out
}

func (p *vppProvider) encapName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Encap
}

func (p *vppProvider) resyncEvery() sdk.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.ResyncInterval
}

func (p *vppProvider) Create(ctx context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	if err := p.Validate(ctx, req.Config); err != nil {
		return sdk.Resource{}, err
	}
	r := record{ID: req.ID, Labels: req.Labels, Config: req.Config, CreatedAt: time.Now().UTC()}
	if err := p.reconcile(ctx, &r, ""); err != nil {
		return sdk.Resource{}, err
	}
	p.syncChecks(p.background())
	return p.Get(ctx, req.ID)
}

func (p *vppProvider) background() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bg == nil {
		return context.Background()
	}
	return p.bg
}

func (p *vppProvider) Get(ctx context.Context, id string) (sdk.Resource, error) {
	st, client, encap, dscp, err := p.current()
	if err != nil {
		return sdk.Resource{}, err
	}
	r, err := st.get(id)
	if err != nil {
		return sdk.Resource{}, err
	}
	have, err := client.table(ctx)
	if err != nil {
		return sdk.Resource{}, err
	}
	return p.resource(r, have, encap, dscp, client.socket), nil
}

// Delete drains before it removes: first every AS leaves the resource's
// VIPs (no flush: established flows stay on their backends, new ones get
// none), then after the grace (at most max_drain) the VIPs no other
// resource uses go, and the record. A Delete whose context ends early
// still finishes the removal.
func (p *vppProvider) Delete(ctx context.Context, id string, grace time.Duration) (bool, error) {
	st, _, _, _, err := p.current()
	if err != nil {
		return false, err
	}
	r, err := st.get(id)
	if errors.Is(err, sdk.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	p.mu.Lock()
	grace = min(grace, time.Duration(*p.cfg.MaxDrain))
	p.mu.Unlock()
	if grace > 0 && r.DrainUntil.IsZero() {
		r.DrainUntil = time.Now().Add(grace).UTC()
		if err := p.reconcile(ctx, &r, ""); err != nil {
			return false, err
		}
	}
	if wait := time.Until(r.DrainUntil); wait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := p.reconcile(fctx, nil, id); err != nil {
		return false, err
	}
	p.syncChecks(p.background())
	return true, nil
}

func (p *vppProvider) PlanUpdate(_ context.Context, cur sdk.Resource, config map[string]any) (sdk.UpdatePlan, error) {
	next, err := sdklb.Decode(config)
	if err != nil {
		return sdk.UpdatePlan{}, err
	}
	old, _ := sdklb.Decode(cur.Config)
	var changed []string
	if old.VIP != next.VIP {
		changed = append(changed, "vip")
	}
	if fmt.Sprint(old.Ports) != fmt.Sprint(next.Ports) {
		changed = append(changed, "ports")
	}
	if fmt.Sprint(old.Backends) != fmt.Sprint(next.Backends) {
		changed = append(changed, "backends")
	}
	if old.Health != next.Health {
		changed = append(changed, "health")
	}
	if len(changed) == 0 {
		return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_NOOP}, nil
	}
	// VIPs that stay keep their flows: only added and removed ports, and
	// backends, change. A new VIP address is new VIPs.
	return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE, Changed: changed,
		Reason: "VPP's VIP and AS tables are changed in place; removed backends drain (no flush)"}, nil
}

func (p *vppProvider) Update(ctx context.Context, cur sdk.Resource, config map[string]any) (sdk.Resource, error) {
	r := record{ID: cur.ID, Labels: cur.Labels, Config: config, CreatedAt: cur.CreatedAt}
	if err := p.reconcile(ctx, &r, ""); err != nil {
		return sdk.Resource{}, err
	}
	return p.Get(ctx, cur.ID)
}

func (p *vppProvider) List(ctx context.Context, labels map[string]string) ([]sdk.Resource, error) {
	st, client, encap, dscp, err := p.current()
	if err != nil {
		return nil, err
	}
	recs, err := st.all()
	if err != nil {
		return nil, err
	}
	have, err := client.table(ctx)
	if err != nil {
		return nil, err
	}
	var out []sdk.Resource
	for _, r := range recs {
		match := true
		for k, v := range labels {
			if r.Labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, p.resource(r, have, encap, dscp, client.socket))
		}
	}
	return out, nil
}

func (p *vppProvider) Recover(ctx context.Context, id string, h sdk.Handle) (sdk.Resource, error) {
	if _, err := sdk.ReadHandle(name, h, handleVersion, func(hs handleState) bool { return hs.ID == id }); err != nil {
		return sdk.Resource{}, err
	}
	// Re-apply what the record wants (VPP may have restarted meanwhile).
	if err := p.reconcile(ctx, nil, ""); err != nil {
		return sdk.Resource{}, err
	}
	p.syncChecks(p.background())
	return p.Get(ctx, id)
}

// Watch reports each watched resource's state and reason when they
// change: a backend's health, a VIP VPP lost, VPP unreachable, deletion.
func (p *vppProvider) Watch(ctx context.Context, ids []string, send func(sdk.ResourceEvent) error) error {
	type seen struct {
		state pluginv1.ResourceState
		why   string
	}
	last := map[string]seen{}
	for {
		for _, id := range ids {
			var cur seen
			r, err := p.Get(ctx, id)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, sdk.ErrNotFound):
				cur = seen{sdk.Deleted, "deleted"}
			case err != nil:
				cur = seen{sdk.Broken, err.Error()}
			default:
				cur = seen{r.State, r.Reason}
			}
			if prev, ok := last[id]; ok && prev == cur {
				continue
			}
			last[id] = cur
			if err := send(sdk.ResourceEvent{ID: id, State: cur.state, Reason: cur.why, At: time.Now()}); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchPoll):
		}
	}
}

// Stats reports backends and ASes. VPP's binary API has no traffic
// counters (lb_as_details carries flags and in_use_since only), and the
// per-VIP packet counters in its stats segment are indexed by a VIP index
// no API message gives (README), so there are none here.
func (p *vppProvider) Stats(ctx context.Context, id string) ([]sdk.Metric, error) {
	r, err := p.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	_, client, encap, dscp, err := p.current()
	if err != nil {
		return nil, err
	}
	have, err := client.table(ctx)
	if err != nil {
		return nil, err
	}
	c, err := sdklb.Decode(r.Config)
	if err != nil {
		return nil, err
	}
	var used, draining, healthy float64
	for _, s := range resourceVIPs(c, encap, dscp) {
		if v := have[s.Key]; v != nil {
			for _, u := range v.ASes {
				if u {
					used++
				} else {
					draining++
				}
			}
		}
	}
	for _, b := range r.Backends {
		if b.Healthy {
			healthy++
		}
	}
	return []sdk.Metric{
		{Label: "backends", Value: float64(len(c.Backends))},
		{Label: "backends_healthy", Value: healthy},
		{Label: "ases_in_use", Value: used},
		{Label: "ases_draining", Value: draining},
	}, nil
}

// Fingerprint is healthy when VPP answers show_version and has the lb
// plugin's messages.
func (p *vppProvider) Fingerprint(ctx context.Context) (sdk.Fingerprint, error) {
	_, client, _, _, err := p.current()
	if err != nil {
		return sdk.Fingerprint{Healthy: false, Reason: err.Error()}, nil
	}
	v, err := client.version(ctx)
	if err != nil {
		return sdk.Fingerprint{Healthy: false, Reason: status.Convert(err).Message()}, nil
	}
	return sdk.Fingerprint{Healthy: true, Attributes: map[string]string{
		"vpp.version": v.Version, "vpp.build_date": v.BuildDate, "vpp.socket": client.socket, "vpp.lb_api": lb.APIVersion,
	}}, nil
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

func main() { sdk.Serve(&vppProvider{}) }
