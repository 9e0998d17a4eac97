// Command unyo-provider-xdp is a provider plugin whose resources are L4
// load balancers ("loadbalancer", config plugins/sdk/lb.Config) realized
// by an XDP program on one interface of the node: a VIP:port:protocol's
// packets go to a backend picked by a Maglev table over a hash of the
// 5-tuple, by DNAT, and the backends' replies get the VIP back on the
// interface's egress (see README.md).
//
// The state directory holds each resource's config and its backends' last
// health; the kernel's maps and the program's links are pinned in a bpffs
// directory, so traffic keeps flowing while the plugin is restarted, and a
// restarted plugin reads both back, re-opens the pins and resumes the
// health checks.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
	"github.com/unyo-ops/unyo/plugins/sdk"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

const (
	version = "1.0.0"
	name    = "xdp"
	// handleVersion is the layout of Handle.State.
	handleVersion = 1
)

// Config is plugin-wide.
type Config struct {
	// Interface is where the program attaches: the node's interface
	// clients' packets to VIPs arrive on and replies leave by.
	Interface string `json:"interface"`
	// Netns is the path of the interface's network namespace
	// (/run/netns/NAME); empty for the plugin's own. Health checks are
	// made from it too.
	Netns string `json:"netns,omitempty"`
	// PinDir is a directory for the pinned maps and links; a bpffs is
	// mounted there when it is not on one.
	PinDir string `json:"pin_dir,omitempty"`
	// Mode is generic (default) or native.
	Mode string `json:"mode,omitempty"`
	// StateDir holds the resources' configs and health.
	StateDir string `json:"state_dir,omitempty"`
}

// Defaults for the directories.
const (
	defaultPinDir   = "/run/unyo/provider-xdp/bpf"
	defaultStateDir = "/var/lib/unyo/provider-xdp"
)

// handleState is Handle.State (version 1).
type handleState struct {
	VIP       string `json:"vip"`
	Interface string `json:"interface"`
	Netns     string `json:"netns,omitempty"`
	PinDir    string `json:"pin_dir"`
}

type xdpProvider struct {
	// mu serializes changes in this process; the state directory's lock
	// serializes them between processes.
	mu       sync.Mutex
	cfg      Config
	dp       *dataplane.Dataplane
	store    store
	monitors map[string]*monitor
	// last status per resource, for Watch.
	last     map[string]lbStatus
	applyErr error
	watchers map[chan sdk.ResourceEvent]bool
}

func newProvider() *xdpProvider {
	return &xdpProvider{monitors: map[string]*monitor{}, last: map[string]lbStatus{}, watchers: map[chan sdk.ResourceEvent]bool{}}
}

func (*xdpProvider) Info() sdk.Info {
	return sdk.Info{Name: name, Version: version, Description: "L4 load balancers in XDP: Maglev-hashed DNAT on one interface, health-checked backends"}
}

func (*xdpProvider) ConfigSchema() string {
	return `{"type":"object","required":["interface"],"additionalProperties":false,"properties":{` +
		`"interface":{"type":"string","minLength":1},"netns":{"type":"string"},"pin_dir":{"type":"string"},` +
		`"mode":{"enum":["","generic","native"]},"state_dir":{"type":"string"}}}`
}

func (p *xdpProvider) Configure(ctx context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.Interface == "" {
		return sdk.Invalid("interface", "is required: the interface the XDP program attaches to")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = string(dataplane.Generic)
	case string(dataplane.Generic), string(dataplane.Native):
	default:
		return sdk.Invalid("mode", "must be generic or native, not %q", cfg.Mode)
	}
	if cfg.PinDir == "" {
		cfg.PinDir = defaultPinDir
	}
	if cfg.StateDir == "" {
		cfg.StateDir = defaultStateDir
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dp != nil && cfg == p.cfg {
		return nil
	}
	if p.dp != nil && len(p.monitors) > 0 && (cfg.Interface != p.cfg.Interface || cfg.Netns != p.cfg.Netns || cfg.PinDir != p.cfg.PinDir || cfg.StateDir != p.cfg.StateDir) {
		return sdk.Invalid("interface", "cannot move %d load balancers from %s; delete them first", len(p.monitors), p.cfg.Interface)
	}
	dp, err := dataplane.Open(dataplane.Options{Interface: cfg.Interface, Netns: cfg.Netns, PinDir: cfg.PinDir, Mode: dataplane.Mode(cfg.Mode)})
	if err != nil {
		return fmt.Errorf("provider xdp: %w", err)
	}
	if p.dp != nil {
		_ = p.dp.Close()
	}
	p.cfg, p.dp, p.store = cfg, dp, store{dir: cfg.StateDir}
	// What an earlier run left: programmed again (after a reboot the
	// pins are gone but the state directory is not), health checks
	// resumed. A failure is each resource's reason, not Configure's.
	if _, err := p.reconcileLocked(ctx, nil); err != nil {
		sdk.Log(ctx).Warn("programming the stored load balancers", slog.Any("err", err))
	}
	return nil
}

func (p *xdpProvider) Probe(context.Context) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dp == nil {
		return false, "provider xdp: not configured"
	}
	return true, ""
}

func (p *xdpProvider) Close(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, m := range p.monitors {
		m.stop()
		delete(p.monitors, id)
	}
	if p.dp != nil {
		// Pins stay: the program keeps forwarding without the plugin.
		return p.dp.Close()
	}
	return nil
}

func (*xdpProvider) ResourceType() string   { return "loadbalancer" }
func (*xdpProvider) ResourceSchema() string { return lb.Schema }

func (*xdpProvider) Validate(_ context.Context, config map[string]any) error {
	_, err := lb.Decode(config)
	return err
}

func (p *xdpProvider) ready() error {
	if p.dp == nil {
		return status.Error(codes.FailedPrecondition, "provider xdp: not configured")
	}
	return nil
}

// change runs fn on the records under both locks, then programs the
// kernel from the result and returns the statuses.
func (p *xdpProvider) change(ctx context.Context, fn func([]record) ([]record, error)) (map[string]lbStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return nil, err
	}
	return p.reconcileLocked(ctx, fn)
}

// reconcileLocked (p.mu held) takes the state lock, reads the records,
// lets fn change them, and makes the kernel and the health monitors match.
func (p *xdpProvider) reconcileLocked(ctx context.Context, fn func([]record) ([]record, error)) (map[string]lbStatus, error) {
	unlock, err := p.store.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have pinned, re-pinned or removed the maps
	// since this one opened them.
	if p.dp.Stale() {
		dp, err := dataplane.Open(dataplane.Options{Interface: p.cfg.Interface, Netns: p.cfg.Netns, PinDir: p.cfg.PinDir, Mode: dataplane.Mode(p.cfg.Mode)})
		if err != nil {
			return nil, fmt.Errorf("provider xdp: re-opening the pinned maps: %w", err)
		}
		_ = p.dp.Close()
		p.dp = dp
	}
	recs, err := p.store.load()
	if err != nil {
		return nil, err
	}
	if fn != nil {
		if recs, err = fn(recs); err != nil {
			return nil, err
		}
	}
	// The monitors follow the records; a record's health is the
	// monitor's (fresher than the file when this process checks).
	byID := map[string]bool{}
	for i, r := range recs {
		byID[r.ID] = true
		cfg, err := lb.Decode(r.Config)
		if err != nil {
			continue
		}
		m := p.monitors[r.ID]
		if m == nil {
			m = newMonitor(p.cfg.Netns, cfg, r.Health, p.healthChanged(r.ID))
			p.monitors[r.ID] = m
			m.start()
		} else if !reflect.DeepEqual(m.cfg, cfg) {
			m.setConfig(cfg, r.Health)
		}
		h := m.snapshot()
		if !reflect.DeepEqual(h, r.Health) {
			recs[i].Health = h
			if err := p.store.save(recs[i]); err != nil {
				return nil, err
			}
		}
	}
	for id, m := range p.monitors {
		if !byID[id] {
			m.stop()
			delete(p.monitors, id)
		}
	}
	services, st := plan(recs)
	p.applyErr = p.dp.Apply(services)
	if p.applyErr != nil {
		for id, s := range st {
			if s.State == sdk.Running {
				st[id] = lbStatus{State: sdk.Broken, Keys: s.Keys, Reason: fmt.Sprintf("programming the XDP tables on %s failed: %v", p.cfg.Interface, p.applyErr)}
			}
		}
	}
	p.publish(st)
	return st, p.applyErr
}

// healthChanged is a monitor's callback: reprogram with the new health.
func (p *xdpProvider) healthChanged(id string) func() {
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.dp == nil || p.monitors[id] == nil {
			return
		}
		if _, err := p.reconcileLocked(context.Background(), nil); err != nil {
			slog.Default().Warn("provider xdp: reprogramming after a health change", "resource", id, "err", err)
		}
	}
}

// publish sends Watch events for statuses that changed.
func (p *xdpProvider) publish(st map[string]lbStatus) {
	now := time.Now()
	var evs []sdk.ResourceEvent
	for id, s := range st {
		if o, ok := p.last[id]; !ok || o.State != s.State || o.Reason != s.Reason {
			evs = append(evs, sdk.ResourceEvent{ID: id, State: s.State, Reason: s.Reason, At: now})
		}
	}
	for id := range p.last {
		if _, ok := st[id]; !ok {
			evs = append(evs, sdk.ResourceEvent{ID: id, State: sdk.Deleted, Reason: "deleted", At: now})
		}
	}
	p.last = st
	for _, e := range evs {
		for ch := range p.watchers {
			select {
			case ch <- e:
			default: // a slow watcher loses events, never blocks the plugin
			}
		}
	}
}

func (p *xdpProvider) Create(ctx context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	cfg, err := lb.Decode(req.Config)
	if err != nil {
		return sdk.Resource{}, err
	}
	// The first health check before the VIP goes live, so that it starts
	// with the backends that answer.
	p.mu.Lock()
	netns := p.cfg.Netns
	p.mu.Unlock()
	first := newMonitor(netns, cfg, nil, func() {})
	first.checkOnce(ctx)
	rec := record{ID: req.ID, Labels: req.Labels, Config: req.Config, CreatedAt: time.Now().UTC(), Health: first.snapshot()}
	var created bool
	st, err := p.change(ctx, func(recs []record) ([]record, error) {
		recs = append(recs, rec)
		if _, st := plan(recs); st[rec.ID].full {
			return nil, status.Errorf(codes.ResourceExhausted, "provider xdp: %s", st[rec.ID].Reason)
		}
		created = true
		return recs, p.store.save(rec)
	})
	if err != nil {
		if created {
			// Nothing is left of a failed Create.
			_, _ = p.store.remove(rec.ID)
			_, _ = p.change(context.WithoutCancel(ctx), nil)
		}
		return sdk.Resource{}, fmt.Errorf("provider xdp: creating %s: %w", req.ID, err)
	}
	return p.resource(rec, st[rec.ID]), nil
}

// find returns the record of id under the state lock.
func (p *xdpProvider) find(id string) (record, lbStatus, error) {
	var rec record
	found := false
	st, err := p.change(context.Background(), func(recs []record) ([]record, error) {
		for _, r := range recs {
			if r.ID == id {
				rec, found = r, true
			}
		}
		return recs, nil
	})
	if err != nil && !found {
		return record{}, lbStatus{}, err
	}
	if !found {
		return record{}, lbStatus{}, fmt.Errorf("provider xdp: no load balancer %s: %w", id, sdk.ErrNotFound)
	}
	// A programming failure is the resource's reason, not Get's error.
	return rec, st[id], nil
}

func (p *xdpProvider) Get(_ context.Context, id string) (sdk.Resource, error) {
	rec, st, err := p.find(id)
	if err != nil {
		return sdk.Resource{}, err
	}
	return p.resource(rec, st), nil
}

func (p *xdpProvider) Delete(ctx context.Context, id string, _ time.Duration) (bool, error) {
	existed := false
	_, err := p.change(ctx, func(recs []record) ([]record, error) {
		out := recs[:0]
		for _, r := range recs {
			if r.ID == id {
				existed = true
				continue
			}
			out = append(out, r)
		}
		if !existed {
			return recs, nil
		}
		_, err := p.store.remove(id)
		return out, err
	})
	if err != nil {
		return existed, fmt.Errorf("provider xdp: deleting %s: %w", id, err)
	}
	return existed, nil
}

// changedFields lists the top-level config fields that differ.
func changedFields(a, b map[string]any) []string {
	var out []string
	for _, k := range []string{"vip", "ports", "backends", "health"} {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	return out
}

func (p *xdpProvider) PlanUpdate(_ context.Context, cur sdk.Resource, config map[string]any) (sdk.UpdatePlan, error) {
	if _, err := lb.Decode(config); err != nil {
		return sdk.UpdatePlan{}, err
	}
	ch := changedFields(cur.Config, config)
	if len(ch) == 0 {
		return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_NOOP}, nil
	}
	return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE, Changed: ch,
		Reason: "the XDP tables are rewritten in place: flows whose Maglev bucket keeps its backend are not disturbed"}, nil
}

func (p *xdpProvider) Update(ctx context.Context, cur sdk.Resource, config map[string]any) (sdk.Resource, error) {
	cfg, err := lb.Decode(config)
	if err != nil {
		return sdk.Resource{}, err
	}
	// New backends are checked once before they take traffic.
	p.mu.Lock()
	netns := p.cfg.Netns
	var saved map[string]backendHealth
	if m := p.monitors[cur.ID]; m != nil {
		saved = m.snapshot()
	}
	p.mu.Unlock()
	first := newMonitor(netns, cfg, saved, func() {})
	first.checkOnce(ctx)
	health := first.snapshot()
	var rec record
	st, err := p.change(ctx, func(recs []record) ([]record, error) {
		i := slices.IndexFunc(recs, func(r record) bool { return r.ID == cur.ID })
		if i < 0 {
			return nil, fmt.Errorf("provider xdp: no load balancer %s: %w", cur.ID, sdk.ErrNotFound)
		}
		next := slices.Clone(recs)
		next[i].Config = config
		for a, h := range health {
			if _, ok := next[i].Health[a]; !ok {
				if next[i].Health == nil {
					next[i].Health = map[string]backendHealth{}
				}
				next[i].Health[a] = h
			}
		}
		if _, st := plan(next); st[cur.ID].full {
			return nil, status.Errorf(codes.ResourceExhausted, "provider xdp: %s", st[cur.ID].Reason)
		}
		if m := p.monitors[cur.ID]; m != nil {
			m.setConfig(cfg, next[i].Health)
		}
		rec = next[i]
		return next, p.store.save(next[i])
	})
	if err != nil {
		return sdk.Resource{}, fmt.Errorf("provider xdp: updating %s: %w", cur.ID, err)
	}
	return p.resource(rec, st[cur.ID]), nil
}

func (p *xdpProvider) List(_ context.Context, labels map[string]string) ([]sdk.Resource, error) {
	var recs []record
	st, err := p.change(context.Background(), func(rs []record) ([]record, error) {
		recs = rs
		return rs, nil
	})
	if err != nil && recs == nil {
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
			out = append(out, p.resource(r, st[r.ID]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Recover takes a resource back after a plugin restart: Configure re-opened
// the pins and resumed the health checks; this programs the kernel from
// the records again (a no-op when the pins held) and answers the resource.
func (p *xdpProvider) Recover(_ context.Context, id string, h sdk.Handle) (sdk.Resource, error) {
	if _, err := sdk.ReadHandle(name, h, handleVersion, func(hs handleState) bool { return hs.VIP != "" }); err != nil {
		return sdk.Resource{}, err
	}
	rec, st, err := p.find(id)
	if err != nil {
		return sdk.Resource{}, err
	}
	return p.resource(rec, st), nil
}

// resource builds the answer: config, state, backends with health and
// traffic.
func (p *xdpProvider) resource(r record, st lbStatus) sdk.Resource {
	// Held throughout: a reconcile may re-open (and close) the data
	// plane whose counters are read here.
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg, dp := p.cfg, p.dp
	c, _ := lb.Decode(r.Config)
	out := sdk.Resource{ID: r.ID, Labels: r.Labels, Config: r.Config, State: st.State, Reason: st.Reason, CreatedAt: r.CreatedAt,
		Handle:     sdk.NewHandle(handleVersion, handleState{VIP: c.VIP, Interface: cfg.Interface, Netns: cfg.Netns, PinDir: cfg.PinDir}),
		Attributes: map[string]string{"interface": cfg.Interface, "mode": cfg.Mode, "vip": c.VIP}}
	if cfg.Netns != "" {
		out.Attributes["netns"] = cfg.Netns
	}
	traffic := p.traffic(dp, st.Keys)
	for _, b := range c.Backends {
		h := r.Health[b.Address]
		bs := &pluginv1.BackendStatus{Address: b.Address, Name: b.Name, Healthy: h.Healthy, Reason: h.Reason}
		if !h.Checked {
			bs.Reason = "not checked yet"
		}
		if !h.Since.IsZero() {
			bs.Since = timestamppb.New(h.Since)
		}
		t := traffic[netip.MustParseAddr(b.Address)]
		bs.Packets, bs.Bytes = t.Packets, t.Bytes
		out.Backends = append(out.Backends, bs)
	}
	return out
}

// traffic sums each backend's counters over the given services.
func (p *xdpProvider) traffic(dp *dataplane.Dataplane, keys []dataplane.Key) map[netip.Addr]dataplane.Counter {
	out := map[netip.Addr]dataplane.Counter{}
	if dp == nil || len(keys) == 0 {
		return out
	}
	cs, err := dp.Counters()
	if err != nil {
		return out
	}
	for _, k := range keys {
		for a, c := range cs[k].Backends {
			out[a] = out[a].Add(c)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// Stats reports the resource's traffic: packets and bytes forwarded in
// total, per port and per backend, packets dropped for want of a healthy
// backend, and how many backends are healthy.
func (p *xdpProvider) Stats(_ context.Context, id string) ([]sdk.Metric, error) {
	rec, st, err := p.find(id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dp := p.dp
	cs, err := dp.Counters()
	if err != nil {
		return nil, fmt.Errorf("provider xdp: reading the counters: %w", err)
	}
	cfg, _ := lb.Decode(rec.Config)
	var total, dropped dataplane.Counter
	var ms []sdk.Metric
	for _, k := range st.Keys {
		sc := cs[k]
		total, dropped = total.Add(sc.Forwarded), dropped.Add(sc.Dropped)
		pre := fmt.Sprintf("%s_%d_", k.Proto, k.Port)
		ms = append(ms, sdk.Metric{Label: pre + "packets", Value: float64(sc.Forwarded.Packets), Unit: "c"},
			sdk.Metric{Label: pre + "bytes", Value: float64(sc.Forwarded.Bytes), Unit: "B"},
			sdk.Metric{Label: pre + "dropped_packets", Value: float64(sc.Dropped.Packets), Unit: "c"})
	}
	traffic := p.traffic(dp, st.Keys)
	healthy := 0
	for _, b := range cfg.Backends {
		if rec.Health[b.Address].Healthy {
			healthy++
		}
		n := b.Name
		if n == "" {
			n = b.Address
		}
		t := traffic[netip.MustParseAddr(b.Address)]
		pre := "backend_" + metricName.ReplaceAllString(n, "_") + "_"
		ms = append(ms, sdk.Metric{Label: pre + "packets", Value: float64(t.Packets), Unit: "c"},
			sdk.Metric{Label: pre + "bytes", Value: float64(t.Bytes), Unit: "B"})
	}
	ms = append([]sdk.Metric{
		{Label: "packets", Value: float64(total.Packets), Unit: "c"},
		{Label: "bytes", Value: float64(total.Bytes), Unit: "B"},
		{Label: "dropped_packets", Value: float64(dropped.Packets), Unit: "c"},
		{Label: "backends_healthy", Value: float64(healthy)},
		{Label: "backends", Value: float64(len(cfg.Backends))},
	}, ms...)
	return ms, nil
}

// Watch reports state changes (health changes show in the reason) of the
// given resources (all when ids is empty) until ctx ends.
func (p *xdpProvider) Watch(ctx context.Context, ids []string, send func(sdk.ResourceEvent) error) error {
	ch := make(chan sdk.ResourceEvent, 64)
	p.mu.Lock()
	p.watchers[ch] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
	}()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-ch:
			if len(want) > 0 && !want[e.ID] {
				continue
			}
			if err := send(e); err != nil {
				return err
			}
		}
	}
}

// Fingerprint: healthy when the program is loaded and the interface is
// there with no other XDP program on it.
func (p *xdpProvider) Fingerprint(context.Context) (sdk.Fingerprint, error) {
	p.mu.Lock()
	cfg, dp, n := p.cfg, p.dp, len(p.monitors)
	attached := dp != nil && dp.Attached()
	p.mu.Unlock()
	if dp == nil {
		return sdk.Fingerprint{Healthy: false, Reason: "provider xdp: not configured"}, nil
	}
	f := sdk.Fingerprint{Healthy: true, Attributes: map[string]string{"interface": cfg.Interface, "mode": cfg.Mode,
		"attached": fmt.Sprint(attached), "loadbalancers": fmt.Sprint(n)}}
	err := nsutil.Do(cfg.Netns, func() error {
		l, err := netlink.LinkByName(cfg.Interface)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached && !attached {
			return fmt.Errorf("another XDP program (id %d) is attached", x.ProgId)
		}
		return nil
	})
	if err != nil {
		f.Healthy, f.Reason = false, fmt.Sprintf("cannot load XDP on %s: %v", cfg.Interface, err)
	}
	return f, nil
}

func main() {
	sdk.Serve(newProvider())
}
