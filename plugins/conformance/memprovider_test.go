package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

// memStore outlives memProvider instances, as a provider's backend does.
type memStore struct {
	mu sync.Mutex
	m  map[string]sdk.Resource
}

// memProvider is a minimal in-process provider for the harness's own test.
// forgetful makes Get report another config: a broken provider.
type memProvider struct {
	s         *memStore
	forgetful bool
}

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
	_, ok := p.s.m[id]
	delete(p.s.m, id)
	return ok, nil
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
	for _, r := range p.s.m {
		ok := true
		for k, v := range labels {
			ok = ok && r.Labels[k] == v
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}
