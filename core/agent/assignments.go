package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/atomicfile"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/host"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// The owner labels every resource the agent creates carries, so that a
// provider's List finds unyo's resources (and strays) again.
const (
	LabelCluster = "unyo.dev/cluster"
	LabelNode    = "unyo.dev/node"
	LabelCompute = "unyo.dev/compute"
	LabelService = "unyo.dev/service"
)

// Assignment states reported to the cluster, and the desired state of an
// assignment being removed.
const (
	stateCreating  = "creating"
	stateRunning   = "running"
	stateFailed    = "failed"
	stateDeleted   = "deleted"
	desiredDeleted = "deleted"
)

// providerKind is the plugin kind of providers.
const providerKind = "provider"

// deleteGrace is how long a removed resource may take to stop.
const deleteGrace = 10 * time.Second

// hasProviders says whether any provider plugin is configured: only then
// does the agent take assignments.
func (a *Agent) hasProviders() bool {
	return slices.ContainsFunc(a.opts.Plugins, func(p host.PluginConfig) bool { return p.Kind == providerKind })
}

// heldResource is what the agent keeps of one resource it created: enough
// to find it again after a restart (the provider's handle).
type heldResource struct {
	Compute       string `json:"compute"`
	Provider      string `json:"provider"`
	Generation    int64  `json:"generation"`
	HandleVersion uint32 `json:"handle_version,omitempty"`
	HandleDriver  string `json:"handle_driver,omitempty"`
	HandleState   []byte `json:"handle_state,omitempty"`
}

// assignmentRunner realizes the node's assignments through its provider
// plugins and reports their state.
type assignmentRunner struct {
	a    *Agent
	path string // "" keeps the handles in memory only
	mu   sync.Mutex
	held map[string]*heldResource
	// declared is, per provider, the resource config keys its schema
	// names (see facts), read once per plugin process.
	declared map[string]declaredKeys
	// lbs are the load balancers' last reports (loadbalancers.go).
	lbs lbTracker
}

type declaredKeys struct {
	plugin *base.Conn
	keys   map[string]bool
}

func (a *Agent) runAssignments(ctx context.Context) {
	<-a.pluginsReady
	if a.plugins == nil {
		return
	}
	r := &assignmentRunner{a: a, held: map[string]*heldResource{}}
	if a.opts.DataDir != "" {
		r.path = filepath.Join(a.opts.DataDir, "assignments.json")
	}
	r.load()
	r.recover(ctx)
	bo := backoff{min: 500 * time.Millisecond, max: 10 * time.Second}
	var since int64
	for ctx.Err() == nil {
		if !a.isRegistered() {
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		resp, err := a.cl.Provision.GetAssignments(ctx, connect.NewRequest(&unyov1.GetAssignmentsRequest{Node: a.nodeName(), SinceGeneration: since}))
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("fetching assignments failed; will retry", "err", a.cl.Explain(err))
				ctxwait.Sleep(ctx, bo.next())
			}
			continue
		}
		bo.reset()
		states := r.reconcile(ctx, resp.Msg.GetAssignments())
		if len(states) > 0 {
			if _, err := a.cl.Provision.ReportAssignments(ctx, connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: a.nodeName(), States: states})); err != nil {
				if ctx.Err() == nil {
					a.log.Warn("reporting assignments failed; will retry", "err", a.cl.Explain(err))
					ctxwait.Sleep(ctx, bo.next())
				}
				// Fetch at once and report again.
				since = 0
				continue
			}
		}
		since = resp.Msg.GetGeneration()
	}
}

func (a *Agent) nodeName() string { return a.opts.NodeName }

func (a *Agent) cluster() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clusterName
}

// load reads the kept handles; a missing file is an empty state.
func (r *assignmentRunner) load() {
	if r.path == "" {
		return
	}
	data, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		var held []*heldResource
		if err = json.Unmarshal(data, &held); err == nil {
			for _, h := range held {
				r.held[h.Compute] = h
			}
			return
		}
	}
	r.a.log.Error("the kept resource handles are unreadable; resources are found again by their labels", "file", r.path, "err", err)
}

func (r *assignmentRunner) save() {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	held := slices.SortedFunc(maps.Values(r.held), func(x, y *heldResource) int { return cmp.Compare(x.Compute, y.Compute) })
	r.mu.Unlock()
	data, err := json.MarshalIndent(held, "", "  ")
	if err == nil {
		err = atomicfile.WriteFile(r.path, data, 0o600)
	}
	if err != nil {
		r.a.log.Error("keeping the resource handles failed", "file", r.path, "err", err)
	}
}

// recover re-attaches every kept resource through its provider after the
// agent (and so the plugins) restarted; one the provider no longer knows
// is forgotten (and made again if it is still assigned).
func (r *assignmentRunner) recover(ctx context.Context) {
	changed := false
	for _, h := range slices.Collect(maps.Values(r.held)) {
		err := r.do(ctx, h.Provider, func(ctx context.Context, c *base.Conn) error {
			_, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: h.Compute,
				Handle: &pluginv1.Handle{Version: h.HandleVersion, Driver: h.HandleDriver, State: h.HandleState}})
			return err
		})
		switch {
		case err == nil:
			r.a.log.Info("resource recovered", "compute", h.Compute, "provider", h.Provider)
		case grpcstatus.Code(err) == codes.NotFound:
			r.a.log.Warn("a kept resource is gone; it is made again if still assigned", "compute", h.Compute)
			r.mu.Lock()
			delete(r.held, h.Compute)
			r.mu.Unlock()
			changed = true
		case grpcstatus.Code(err) == codes.Unimplemented:
		default:
			r.a.log.Warn("recovering a resource failed; its assignment is applied again", "compute", h.Compute, "err", err)
		}
	}
	if changed {
		r.save()
	}
}

func (r *assignmentRunner) do(ctx context.Context, provider string, fn func(ctx context.Context, c *base.Conn) error) error {
	p, err := r.a.plugins.Plugin(providerKind, provider)
	if err != nil {
		return fmt.Errorf("provider %q: %w", provider, err)
	}
	return p.Do(ctx, fn)
}

// reconcile makes the provider's resources match the assignments, both
// ways: each assignment to run is created (idempotently on its compute's
// name), each to delete is deleted, and each resource with this node's
// owner labels that no assignment wants (a stray) is deleted. It returns
// the state of every assignment.
func (r *assignmentRunner) reconcile(ctx context.Context, as []*unyov1.Assignment) []*unyov1.AssignmentState {
	r.a.ports.update(as)
	var states []*unyov1.AssignmentState
	wanted := map[string]bool{}
	for _, as := range as {
		if as.GetDesired() != desiredDeleted {
			wanted[as.GetCompute()] = true
		}
	}
	changed := false
	for _, as := range as {
		var st *unyov1.AssignmentState
		switch {
		case as.GetDesired() == desiredDeleted:
			st = r.remove(ctx, as.GetProvider(), as.GetCompute())
		case as.GetLoadbalancer() != nil:
			st = r.applyLoadbalancer(ctx, as) // loadbalancers.go
		default:
			st = r.create(ctx, as)
		}
		st.Generation = as.GetGeneration()
		st.UpdatedAt = timestamppb.Now()
		states = append(states, st)
		changed = true
	}
	// Strays: resources kept or listed that no assignment wants.
	strays := map[string]string{}
	r.mu.Lock()
	for name, h := range r.held {
		if !wanted[name] {
			strays[name] = h.Provider
		}
	}
	r.mu.Unlock()
	for _, pc := range r.a.opts.Plugins {
		if pc.Kind != providerKind {
			continue
		}
		var listed []*pluginv1.Resource
		err := r.do(ctx, pc.Name, func(ctx context.Context, c *base.Conn) error {
			resp, err := c.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{LabelNode: r.a.nodeName()}})
			listed = resp.GetResources()
			return err
		})
		if err != nil && grpcstatus.Code(err) != codes.Unimplemented {
			r.a.log.Warn("listing a provider's resources failed", "provider", pc.Name, "err", err)
		}
		for _, res := range listed {
			if res.GetState() != pluginv1.ResourceState_RESOURCE_STATE_DELETED && !wanted[res.GetId()] && res.GetLabels()[LabelCluster] == r.a.cluster() {
				strays[res.GetId()] = pc.Name
			}
		}
	}
	for name, provider := range strays {
		if st := r.remove(ctx, provider, name); st.GetState() == stateDeleted {
			r.a.log.Info("stray resource deleted", "compute", name, "provider", provider)
			changed = true
		}
	}
	if changed {
		r.save()
	}
	return states
}

// create makes (or finds) the resource of an assignment.
func (r *assignmentRunner) create(ctx context.Context, as *unyov1.Assignment) *unyov1.AssignmentState {
	st := &unyov1.AssignmentState{Compute: as.GetCompute()}
	cfg := map[string]any{"command": toAny(as.GetCommand())}
	if len(as.GetEnv()) > 0 {
		env := map[string]any{}
		for k, v := range as.GetEnv() {
			env[k] = v
		}
		cfg["env"] = env
	}
	st.Address = as.GetAddress()
	labels := map[string]string{LabelCluster: r.a.cluster(), LabelNode: r.a.nodeName(), LabelCompute: as.GetCompute(), LabelService: as.GetService()}
	var res *pluginv1.Resource
	err := r.do(ctx, as.GetProvider(), func(ctx context.Context, c *base.Conn) error {
		keys, err := r.providerKeys(ctx, as.GetProvider(), c)
		if err != nil {
			return err
		}
		f, err := r.a.ports.facts(as, facts(as))
		if err != nil {
			return err
		}
		for k, v := range f {
			if keys[k] {
				cfg[k] = v
			}
		}
		config, err := structpb.NewStruct(cfg)
		if err != nil {
			return fmt.Errorf("the assignment's config: %w", err)
		}
		resp, err := c.Provider.Create(ctx, &pluginv1.CreateRequest{Id: as.GetCompute(), Labels: labels, Config: config})
		res = resp.GetResource()
		return err
	})
	if err != nil {
		st.State, st.Message = stateFailed, fmt.Sprintf("provider %s: %v", as.GetProvider(), err)
		return st
	}
	h := res.GetHandle()
	r.mu.Lock()
	r.held[as.GetCompute()] = &heldResource{Compute: as.GetCompute(), Provider: as.GetProvider(), Generation: as.GetGeneration(),
		HandleVersion: h.GetVersion(), HandleDriver: h.GetDriver(), HandleState: h.GetState()}
	r.mu.Unlock()
	st.Handle = fmt.Sprintf("%s/%s", as.GetProvider(), res.GetId())
	switch res.GetState() {
	case pluginv1.ResourceState_RESOURCE_STATE_RUNNING:
		st.State = stateRunning
	case pluginv1.ResourceState_RESOURCE_STATE_PENDING:
		st.State = stateCreating
	default:
		st.State, st.Message = stateFailed, fmt.Sprintf("%s: %s", res.GetState(), res.GetReason())
	}
	return st
}

// facts are what the cluster says of an assignment beyond its command and
// env, under the resource config keys providers use for them: the address
// root's IPAM allocated, the image and the flavor's shape. Each goes only
// to a provider whose resource schema names its key (provider-exec takes
// the address as UNYO_ADDRESS; provider-docker the image and the shape), as
// a schema may refuse keys it does not name.
func facts(as *unyov1.Assignment) map[string]any {
	f := map[string]any{}
	add := func(k string, v any, set bool) {
		if set {
			f[k] = v
		}
	}
	add("address", as.GetAddress(), as.GetAddress() != "")
	add("image", as.GetImageSource(), as.GetImageSource() != "")
	r := as.GetResources()
	add("vcpus", r.GetVcpus(), r.GetVcpus() > 0)
	add("memory_bytes", r.GetMemoryBytes(), r.GetMemoryBytes() > 0)
	add("disk_bytes", r.GetDiskBytes(), r.GetDiskBytes() > 0)
	return f
}

// providerKeys returns the top-level properties of provider's resource
// schema, asked of the plugin process c once (a restarted plugin is asked
// again).
func (r *assignmentRunner) providerKeys(ctx context.Context, provider string, c *base.Conn) (map[string]bool, error) {
	r.mu.Lock()
	d, ok := r.declared[provider]
	r.mu.Unlock()
	if ok && d.plugin == c {
		return d.keys, nil
	}
	resp, err := c.Provider.Schema(ctx, &pluginv1.SchemaRequest{})
	if err != nil {
		return nil, fmt.Errorf("reading its resource schema: %w", err)
	}
	keys, err := schemaKeys(resp.GetResourceSchema())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.declared == nil {
		r.declared = map[string]declaredKeys{}
	}
	r.declared[provider] = declaredKeys{plugin: c, keys: keys}
	r.mu.Unlock()
	return keys, nil
}

// schemaKeys are the top-level properties a JSON schema names.
func schemaKeys(schema string) (map[string]bool, error) {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		return nil, fmt.Errorf("its resource schema is not JSON: %w", err)
	}
	keys := map[string]bool{}
	for k := range s.Properties {
		keys[k] = true
	}
	return keys, nil
}

// remove deletes a resource; deleting an unknown one succeeds.
func (r *assignmentRunner) remove(ctx context.Context, provider, compute string) *unyov1.AssignmentState {
	st := &unyov1.AssignmentState{Compute: compute}
	err := r.do(ctx, provider, func(ctx context.Context, c *base.Conn) error {
		_, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: compute, Grace: durationpb.New(deleteGrace)})
		return err
	})
	if err != nil {
		st.State, st.Message = stateFailed, fmt.Sprintf("delete through provider %s: %v", provider, err)
		return st
	}
	r.mu.Lock()
	delete(r.held, compute)
	r.mu.Unlock()
	st.State = stateDeleted
	return st
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
