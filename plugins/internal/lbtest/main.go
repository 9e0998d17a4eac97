// Command lbtest is a test-only load-balancer provider: it exists only to
// test the load-balancer flow end to end (root, cluster, agent) in
// integration/, and forwards no packet. It decodes every config as
// plugins/sdk/lb.Config (as the real xdp and vpp providers do), appends
// each operation to a record file (one JSON line: op, id, vip, backends)
// for the test to read, and reports every backend healthy with traffic
// counters that grow on every Get.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// Record is one line of the record file.
type Record struct {
	Op       string   `json:"op"`
	ID       string   `json:"id"`
	VIP      string   `json:"vip,omitempty"`
	Backends []string `json:"backends,omitempty"`
}

type lbRes struct {
	res   sdk.Resource
	cfg   lb.Config
	since time.Time
	gets  uint64
}

type provider struct {
	mu     sync.Mutex
	record string
	res    map[string]*lbRes
}

func (*provider) Info() sdk.Info {
	return sdk.Info{Name: "lbtest", Version: "0.0.1", Description: "test-only load balancer: records its configs, forwards nothing"}
}

func (*provider) ConfigSchema() string {
	return `{"type":"object","required":["record"],"additionalProperties":false,"properties":{"record":{"type":"string","minLength":1}}}`
}

func (p *provider) Configure(_ context.Context, c map[string]any) error {
	var cfg struct {
		Record string `json:"record"`
	}
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record = cfg.Record
	if p.res == nil {
		p.res = map[string]*lbRes{}
	}
	return nil
}

func (*provider) Probe(context.Context) (bool, string) { return true, "" }
func (*provider) ResourceType() string                 { return "loadbalancer" }
func (*provider) ResourceSchema() string               { return lb.Schema }

func (*provider) Validate(_ context.Context, config map[string]any) error {
	_, err := lb.Decode(config)
	return err
}

// write appends a record; p.mu is held.
func (p *provider) write(op, id string, c lb.Config) error {
	r := Record{Op: op, ID: id, VIP: c.VIP}
	for _, b := range c.Backends {
		r.Backends = append(r.Backends, b.Name)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p.record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// view is r as Get answers it: every backend healthy, its counters grown.
func (r *lbRes) view() sdk.Resource {
	r.gets++
	out := r.res
	out.Backends = nil
	for _, b := range r.cfg.Backends {
		out.Backends = append(out.Backends, &pluginv1.BackendStatus{Address: b.Address, Name: b.Name, Healthy: true,
			Packets: r.gets * 10, Bytes: r.gets * 1000, Since: timestamppb.New(r.since)})
	}
	return out
}

func (p *provider) Create(_ context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	c, err := lb.Decode(req.Config)
	if err != nil {
		return sdk.Resource{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.write("create", req.ID, c); err != nil {
		return sdk.Resource{}, fmt.Errorf("record: %w", err)
	}
	now := time.Now()
	r := &lbRes{res: sdk.Resource{ID: req.ID, Labels: req.Labels, Config: req.Config, State: sdk.Running, CreatedAt: now}, cfg: c, since: now}
	p.res[req.ID] = r
	return r.view(), nil
}

func (p *provider) Get(_ context.Context, id string) (sdk.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.res[id]
	if !ok {
		return sdk.Resource{}, sdk.ErrNotFound
	}
	return r.view(), nil
}

func (p *provider) Delete(_ context.Context, id string, _ time.Duration) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.res[id]
	if !ok {
		return false, nil
	}
	delete(p.res, id)
	return true, p.write("delete", id, r.cfg)
}

func (p *provider) PlanUpdate(_ context.Context, _ sdk.Resource, _ map[string]any) (sdk.UpdatePlan, error) {
	return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE}, nil
}

func (p *provider) Update(_ context.Context, cur sdk.Resource, config map[string]any) (sdk.Resource, error) {
	c, err := lb.Decode(config)
	if err != nil {
		return sdk.Resource{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.res[cur.ID]
	if !ok {
		return sdk.Resource{}, sdk.ErrNotFound
	}
	if err := p.write("update", cur.ID, c); err != nil {
		return sdk.Resource{}, fmt.Errorf("record: %w", err)
	}
	r.cfg, r.res.Config = c, config
	return r.view(), nil
}

func (p *provider) List(_ context.Context, labels map[string]string) ([]sdk.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []sdk.Resource
	for _, id := range slices.Sorted(maps.Keys(p.res)) {
		r := p.res[id]
		match := true
		for k, v := range labels {
			match = match && r.res.Labels[k] == v
		}
		if match {
			out = append(out, r.res)
		}
	}
	return out, nil
}

func main() { sdk.Serve(&provider{}) }
