package agent

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

const (
	// fingerprintInterval is the longest a provider's Fingerprint stream
	// stays silent; it sends every change at once.
	fingerprintInterval = 30 * time.Second
	// fingerprintRetry is the pause before a broken Fingerprint stream is
	// opened again (the plugin restarting, say).
	fingerprintRetry = time.Second
	// providersFirstWait bounds how long the first registration waits for
	// every provider's first fingerprint.
	providersFirstWait = 10 * time.Second
)

// providerHealth keeps each configured provider plugin's latest
// fingerprint, as the heartbeats report it. Before its first fingerprint a
// provider is unhealthy ("no fingerprint yet"), so that a node is never
// offered replicas its provider may not be able to run.
type providerHealth struct {
	mu     sync.Mutex
	byName map[string]*unyov1.ProviderStatus
	// heard are the providers whose first fingerprint (or failure) came;
	// first is closed when all have.
	heard map[string]bool
	first chan struct{}
	// changed wakes the heartbeat loop when a provider's status changed.
	changed chan struct{}
}

func (h *providerHealth) init(names []string, now time.Time) {
	h.byName, h.heard = map[string]*unyov1.ProviderStatus{}, map[string]bool{}
	h.first, h.changed = make(chan struct{}), make(chan struct{}, 1)
	for _, n := range names {
		h.byName[n] = &unyov1.ProviderStatus{Name: n, Reason: "the provider plugin has not sent its first fingerprint yet", Since: timestamppb.New(now)}
	}
	if len(names) == 0 {
		close(h.first)
	}
}

// list is every provider's status, by name; nil when none is configured.
// The messages are never changed once listed (set replaces them).
func (h *providerHealth) list() []*unyov1.ProviderStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.byName) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Values(h.byName), func(a, b *unyov1.ProviderStatus) int { return cmp.Compare(a.GetName(), b.GetName()) })
}

// set records a provider's fingerprint; since moves only when its health
// flips. A change wakes the heartbeat.
func (h *providerHealth) set(st *unyov1.ProviderStatus, now time.Time) {
	// The cluster refuses longer texts (and with them the heartbeat).
	st.Reason, _ = limits.Truncate(st.GetReason(), limits.MaxText)
	h.mu.Lock()
	old := h.byName[st.GetName()]
	st.Since = timestamppb.New(now)
	if old != nil && old.GetHealthy() == st.GetHealthy() && h.heard[st.GetName()] {
		st.Since = old.GetSince()
	}
	changed := !proto.Equal(old, st)
	h.byName[st.GetName()] = st
	if !h.heard[st.GetName()] {
		h.heard[st.GetName()] = true
		if len(h.heard) == len(h.byName) {
			close(h.first)
		}
	}
	h.mu.Unlock()
	if changed {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
}

// waitFirst waits until every provider sent its first fingerprint (or
// failed to), at most max.
func (h *providerHealth) waitFirst(ctx context.Context, max time.Duration) {
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-h.first:
	case <-t.C:
	case <-ctx.Done():
	}
}

// providerNames are the configured provider plugins' names.
func (a *Agent) providerNames() []string {
	var out []string
	for _, pc := range a.opts.Plugins {
		if pc.Kind == providerKind {
			out = append(out, pc.Name)
		}
	}
	return out
}

// watchProviders follows every provider plugin's Fingerprint stream until
// ctx ends.
func (a *Agent) watchProviders(ctx context.Context) {
	<-a.pluginsReady
	var wg sync.WaitGroup
	for _, name := range a.providerNames() {
		wg.Add(1)
		go func() { defer wg.Done(); a.watchProvider(ctx, name) }()
	}
	wg.Wait()
}

// watchProvider keeps one provider's health: its fingerprints while its
// plugin streams them; healthy while its plugin runs when it offers no
// fingerprint; unhealthy, with the plugin's trouble as the reason, while
// the plugin does not run or its stream fails.
func (a *Agent) watchProvider(ctx context.Context, name string) {
	unhealthy := func(format string, args ...any) {
		a.providers.set(&unyov1.ProviderStatus{Name: name, Reason: fmt.Sprintf(format, args...)}, time.Now())
	}
	if a.plugins == nil {
		unhealthy("the plugin host cannot run: %v", a.pluginsErr)
		return
	}
	p, err := a.plugins.Plugin(providerKind, name)
	if err != nil {
		unhealthy("provider plugin %s: %v", name, err)
		return
	}
	select {
	case <-p.Started():
	case <-ctx.Done():
		return
	}
	for ctx.Err() == nil {
		err := p.Do(ctx, func(ctx context.Context, c *base.Conn) error {
			stream, err := c.Provider.Fingerprint(ctx, &pluginv1.FingerprintRequest{Interval: durationpb.New(fingerprintInterval)})
			if err != nil {
				return err
			}
			for {
				m, err := stream.Recv()
				if err != nil {
					return err
				}
				st := providerStatus(name, m)
				st.Capacity = overrideCapacity(st.GetCapacity(), a.opts.Capacity, true)
				a.providers.set(st, time.Now())
			}
		})
		if ctx.Err() != nil {
			return
		}
		if grpcstatus.Code(err) == codes.Unimplemented {
			// No fingerprints: healthy for as long as this plugin
			// process runs (the ctx Do gives ends when it exits).
			a.providers.set(&unyov1.ProviderStatus{Name: name, Healthy: true}, time.Now())
			err = p.Do(ctx, func(ctx context.Context, _ *base.Conn) error {
				<-ctx.Done()
				return fmt.Errorf("provider plugin %s stopped", name)
			})
			if ctx.Err() != nil {
				return
			}
		}
		unhealthy("%v", err)
		ctxwait.Sleep(ctx, fingerprintRetry)
	}
}

// providerStatus is a fingerprint as the cluster keeps it; a capacity of
// zeros is none.
func providerStatus(name string, m *pluginv1.FingerprintResponse) *unyov1.ProviderStatus {
	st := &unyov1.ProviderStatus{Name: name, Healthy: m.GetHealthy(), Reason: m.GetReason(), Attributes: m.GetAttributes()}
	if c := m.GetCapacity(); c.GetCpus() > 0 || c.GetMemoryBytes() > 0 || c.GetDiskBytes() > 0 {
		st.Capacity = &unyov1.Capacity{Cpus: c.GetCpus(), MemoryBytes: c.GetMemoryBytes(), DiskBytes: c.GetDiskBytes()}
	}
	if st.Healthy {
		st.Reason = ""
	}
	return st
}

// overrideCapacity applies agent.capacity to a detected capacity c: each
// field it sets replaces c's (drop: is left out, for a provider's, since
// the machine's then says it alone). A result of zeros is nil.
func overrideCapacity(c, override *unyov1.Capacity, drop bool) *unyov1.Capacity {
	out := &unyov1.Capacity{Cpus: c.GetCpus(), MemoryBytes: c.GetMemoryBytes(), DiskBytes: c.GetDiskBytes()}
	pick := func(have, set int64) int64 {
		switch {
		case set <= 0:
			return have
		case drop:
			return 0
		}
		return set
	}
	out.Cpus = int32(pick(int64(out.Cpus), int64(override.GetCpus())))
	out.MemoryBytes = pick(out.MemoryBytes, override.GetMemoryBytes())
	out.DiskBytes = pick(out.DiskBytes, override.GetDiskBytes())
	if out.Cpus == 0 && out.MemoryBytes == 0 && out.DiskBytes == 0 {
		return nil
	}
	return out
}
