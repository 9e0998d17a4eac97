package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// memStore outlives memProvider instances, as a provider's backend does.
type memStore struct {
	mu sync.Mutex
	m  map[string]sdk.Resource
	// strays are resources a defective Delete left listed.
	strays map[string]sdk.Resource
}

// memProvider is a minimal in-process provider for the harness's own test.
// forgetful makes Get report another config: a broken provider. defect
// names one other way it is broken (see providerDefects), "" for none.
type memProvider struct {
	s         *memStore
	forgetful bool
	defect    string
}

// The provider defects, each named for what the provider does wrong.
const (
	updateNotStored   = "update-not-stored"   // Update answers with the new config, never stores it
	statsUnknownOK    = "stats-unknown-ok"    // Stats of an unknown id answers OK
	listAnyLabel      = "list-any-label"      // List matches ANY label instead of ALL
	deleteLeavesStray = "delete-leaves-stray" // Delete forgets Get's entry, List still finds it
	watchEndsAtOnce   = "watch-ends-at-once"  // Watch returns at once instead of watching
)

func (*memProvider) Info() sdk.Info                                  { return sdk.Info{Name: "mem", Version: "0.1.0"} }
func (*memProvider) ConfigSchema() string                            { return "{}" }
func (*memProvider) Configure(context.Context, map[string]any) error { return nil }
func (*memProvider) Probe(context.Context) (bool, string)            { return true, "" }
func (*memProvider) ResourceType() string                            { return "memory" }
func (*memProvider) ResourceSchema() string                          { return `{"type":"object"}` }

func (*memProvider) Validate(_ context.Context, c map[string]any) error {
	var cfg struct {
		Size float64 `json:"size"`
	}
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.Size < 0 {
		return sdk.Invalid("size", "must not be negative")
	}
	return nil
}

func (p *memProvider) Create(_ context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	if req.Config["size"] == 13.0 {
		return sdk.Resource{}, errors.New("unlucky size")
	}
	r := sdk.Resource{ID: req.ID, Labels: req.Labels, Config: req.Config, State: sdk.Running, CreatedAt: time.Now(),
		Handle: sdk.Handle{Version: 1, State: []byte(req.ID)}}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.m[req.ID] = r
	return r, nil
}

func (p *memProvider) Get(_ context.Context, id string) (sdk.Resource, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	r, ok := p.s.m[id]
	if !ok {
		return r, fmt.Errorf("mem %s: %w", id, sdk.ErrNotFound)
	}
	if p.forgetful {
		r.Config = map[string]any{"size": 99.0}
	}
	return r, nil
}

func (p *memProvider) Delete(_ context.Context, id string, _ time.Duration) (bool, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	r, ok := p.s.m[id]
	delete(p.s.m, id)
	if _, stray := p.s.strays[id]; stray {
		delete(p.s.strays, id)
	} else if ok && p.defect == deleteLeavesStray {
		if p.s.strays == nil {
			p.s.strays = map[string]sdk.Resource{}
		}
		p.s.strays[id] = r
	}
	return ok, nil
}

func (p *memProvider) PlanUpdate(_ context.Context, cur sdk.Resource, cfg map[string]any) (sdk.UpdatePlan, error) {
	if cur.Config["size"] == cfg["size"] {
		return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_NOOP}, nil
	}
	return sdk.UpdatePlan{Action: pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE, Changed: []string{"size"}}, nil
}

func (p *memProvider) Update(_ context.Context, cur sdk.Resource, cfg map[string]any) (sdk.Resource, error) {
	cur.Config = cfg
	if p.defect == updateNotStored {
		return cur, nil
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.m[cur.ID] = cur
	return cur, nil
}

func (p *memProvider) Stats(ctx context.Context, id string) ([]sdk.Metric, error) {
	if p.defect == statsUnknownOK {
		return nil, nil
	}
	r, err := p.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	size, _ := r.Config["size"].(float64)
	return []sdk.Metric{{Label: "size", Value: size}}, nil
}

func (p *memProvider) Watch(ctx context.Context, _ []string, _ func(sdk.ResourceEvent) error) error {
	if p.defect == watchEndsAtOnce {
		return nil
	}
	<-ctx.Done() // memory never changes state by itself
	return nil
}

func (p *memProvider) Fingerprint(context.Context) (sdk.Fingerprint, error) {
	return sdk.Fingerprint{Healthy: true, MemoryBytes: 1 << 20}, nil
}

func (p *memProvider) Recover(ctx context.Context, id string, h sdk.Handle) (sdk.Resource, error) {
	if h.Version != 1 {
		return sdk.Resource{}, sdk.ErrBadHandle
	}
	return p.Get(ctx, string(h.State))
}

func (p *memProvider) List(_ context.Context, labels map[string]string) ([]sdk.Resource, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	var out []sdk.Resource
	for _, m := range []map[string]sdk.Resource{p.s.m, p.s.strays} {
		for _, r := range m {
			match := true
			for k, v := range labels {
				match = match && r.Labels[k] == v
			}
			if p.defect == listAnyLabel {
				match = false
				for k, v := range labels {
					match = match || r.Labels[k] == v
				}
			}
			if match {
				out = append(out, r)
			}
		}
	}
	return out, nil
}
