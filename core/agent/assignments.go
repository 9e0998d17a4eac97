package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
// to find it again after a restart (the provider's handle), and the
// assignment generation it realizes, so that an unchanged assignment is
// not handed to the provider again.
type heldResource struct {
	Compute       string `json:"compute"`
	Provider      string `json:"provider"`
	Generation    int64  `json:"generation"`
	HandleVersion uint32 `json:"handle_version,omitempty"`
	HandleDriver  string `json:"handle_driver,omitempty"`
	HandleState   []byte `json:"handle_state,omitempty"`
}

// assignmentAPI is the part of the cluster's ProvisionService the runner
// uses (a seam for tests).
type assignmentAPI interface {
	GetAssignments(context.Context, *connect.Request[unyov1.GetAssignmentsRequest]) (*connect.Response[unyov1.GetAssignmentsResponse], error)
	ReportAssignments(context.Context, *connect.Request[unyov1.ReportAssignmentsRequest]) (*connect.Response[unyov1.ReportAssignmentsResponse], error)
}

// providerFunc runs fn against the named provider plugin's connection.
type providerFunc func(ctx context.Context, provider string, fn func(ctx context.Context, c *base.Conn) error) error

// realizeParallel bounds the provider calls one pass makes at once: a
// provider's Create mostly waits (a process starting, an image loading).
const realizeParallel = 8

// resyncEvery is how often the agent reports every assignment's state,
// changed or not, so that a report the cluster lost is mended.
const resyncEvery = 5 * time.Minute

// assignmentRunner realizes the node's assignments through its provider
// plugins and reports their state.
//
// Work is proportional to what changed: an assignment whose generation the
// held resource already realizes, and which its provider still lists, is
// not handed to the provider again, and only states that differ from what
// the cluster last took are reported. Passes run one after another, and a
// pass acts on each compute once (up to realizeParallel computes at a
// time), so two Creates of one compute are never in flight together: a
// Create still running when the assignments change again is waited for
// before the next pass looks at them.
type assignmentRunner struct {
	node       string
	cluster    func() string
	registered func() bool
	log        *slog.Logger
	api        assignmentAPI
	providers  []string // the configured provider plugins
	do         providerFunc
	path       string // "" keeps the handles in memory only

	mu   sync.Mutex
	held map[string]*heldResource
	// declared is, per provider, the resource config keys its schema
	// names (see facts), read once per plugin process.
	declared map[string]declaredKeys
	// lbs are the load balancers' last reports (loadbalancers.go).
	lbs lbTracker
	// ports wires compute ports (nil unless agent.ports.enabled; see
	// ports.go).
	ports *portRunner
	// explain words an API error for the log.
	explain func(error) error
	// restarted names provider plugins that started again (nil: none
	// are followed); recoverFor collects them until the loop recovers
	// their resources, and cancelPoll wakes the loop from its long poll.
	restarted  <-chan string
	recoverFor map[string]bool
	cancelPoll context.CancelFunc

	// The loop's alone:
	// reported is, per compute, the state the cluster last took.
	reported map[string]reportedState
	// failed is, per compute, the generation whose Create failed and the
	// state reported for it: a failed Create is not retried at the same
	// generation (the cluster's healer re-creates it with backoff, which
	// moves the generation).
	failed map[string]*unyov1.AssignmentState
	// lastFull is when every state was last reported.
	lastFull time.Time
}

// reportedState is what of an AssignmentState the cluster acts on.
type reportedState struct {
	generation                      int64
	state, handle, address, message string
}

func reportedOf(st *unyov1.AssignmentState) reportedState {
	return reportedState{st.GetGeneration(), st.GetState(), st.GetHandle(), st.GetAddress(), st.GetMessage()}
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
	r := &assignmentRunner{
		node: a.nodeName(), cluster: a.cluster, registered: a.isRegistered, log: a.log, api: a.cl.Provision, ports: a.ports,
		restarted: a.providerRestarts,
		do: func(ctx context.Context, provider string, fn func(ctx context.Context, c *base.Conn) error) error {
			p, err := a.plugins.Plugin(providerKind, provider)
			if err != nil {
				return fmt.Errorf("provider %q: %w", provider, err)
			}
			return p.Do(ctx, fn)
		},
	}
	for _, pc := range a.opts.Plugins {
		if pc.Kind == providerKind {
			r.providers = append(r.providers, pc.Name)
		}
	}
	if a.opts.DataDir != "" {
		r.path = filepath.Join(a.opts.DataDir, "assignments.json")
	}
	r.run(ctx, a.cl.Explain)
}

// run loads the kept handles, recovers them and follows the node's
// assignments until ctx ends.
func (r *assignmentRunner) run(ctx context.Context, explain func(error) error) {
	r.explain = explain
	if r.held == nil {
		r.held = map[string]*heldResource{}
	}
	r.reported = map[string]reportedState{}
	r.failed = map[string]*unyov1.AssignmentState{}
	r.load()
	// The plugins' first starts are behind us: the recovery below covers
	// them.
	for len(r.restarted) > 0 {
		<-r.restarted
	}
	r.recover(ctx, nil)
	if r.restarted != nil {
		go r.followRestarts(ctx)
	}
	bo := backoff{min: 500 * time.Millisecond, max: 10 * time.Second}
	var since int64
	for ctx.Err() == nil {
		if !r.registered() {
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		if only := r.takeRestarted(); len(only) > 0 {
			r.recover(ctx, only)
			// A pass at once: what the provider lost is made again.
			since = 0
		}
		pollCtx, cancel := context.WithCancel(ctx)
		r.setPollCancel(cancel)
		resp, err := r.api.GetAssignments(pollCtx, connect.NewRequest(&unyov1.GetAssignmentsRequest{Node: r.node, SinceGeneration: since}))
		r.setPollCancel(nil)
		cancel()
		if err != nil && ctx.Err() == nil && pollCtx.Err() != nil {
			continue // woken to recover a restarted provider's resources
		}
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("fetching assignments failed; will retry", "err", explain(err))
				ctxwait.Sleep(ctx, bo.next())
			}
			continue
		}
		bo.reset()
		states := r.reconcile(ctx, resp.Msg.GetAssignments())
		full := since == 0 || time.Since(r.lastFull) >= resyncEvery
		if !full {
			states = r.unreported(states)
		}
		if len(states) > 0 {
			if _, err := r.api.ReportAssignments(ctx, connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: r.node, States: states})); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("reporting assignments failed; will retry", "err", explain(err))
					ctxwait.Sleep(ctx, bo.next())
				}
				// Fetch at once and report again.
				since = 0
				continue
			}
		}
		r.taken(resp.Msg.GetAssignments(), states)
		if full {
			r.lastFull = time.Now()
		}
		// The store's counter starts at 1, so the next fetch waits.
		since = resp.Msg.GetGeneration()
	}
}

// unreported are the states that differ from what the cluster last took.
func (r *assignmentRunner) unreported(states []*unyov1.AssignmentState) []*unyov1.AssignmentState {
	var out []*unyov1.AssignmentState
	for _, st := range states {
		if prev, ok := r.reported[st.GetCompute()]; !ok || prev != reportedOf(st) {
			out = append(out, st)
		}
	}
	return out
}

// taken records the states the cluster took, and forgets computes no
// longer assigned to the node.
func (r *assignmentRunner) taken(as []*unyov1.Assignment, states []*unyov1.AssignmentState) {
	for _, st := range states {
		r.reported[st.GetCompute()] = reportedOf(st)
	}
	assigned := map[string]bool{}
	for _, a := range as {
		assigned[a.GetCompute()] = true
	}
	maps.DeleteFunc(r.reported, func(c string, _ reportedState) bool { return !assigned[c] })
	maps.DeleteFunc(r.failed, func(c string, _ *unyov1.AssignmentState) bool { return !assigned[c] })
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
	r.log.Error("the kept resource handles are unreadable; resources are found again by their labels", "file", r.path, "err", err)
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
		r.log.Error("keeping the resource handles failed", "file", r.path, "err", err)
	}
}

// followRestarts notes each restarted provider and wakes the loop, which
// recovers its resources before its next pass (passes never overlap, so a
// Recover cannot race a Create of the same compute).
func (r *assignmentRunner) followRestarts(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-r.restarted:
			r.mu.Lock()
			if r.recoverFor == nil {
				r.recoverFor = map[string]bool{}
			}
			r.recoverFor[name] = true
			cancel := r.cancelPoll
			r.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
}

// takeRestarted returns and clears the providers to recover.
func (r *assignmentRunner) takeRestarted() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	only := r.recoverFor
	r.recoverFor = nil
	return only
}

// setPollCancel keeps the running long poll's cancel (nil when none runs);
// a restart noted just before the poll began cancels it at once.
func (r *assignmentRunner) setPollCancel(cancel context.CancelFunc) {
	r.mu.Lock()
	r.cancelPoll = cancel
	pending := len(r.recoverFor) > 0
	r.mu.Unlock()
	if cancel != nil && pending {
		cancel()
	}
}

// recover re-attaches every kept resource of the providers in only (nil:
// all) through its provider: after the agent (and so the plugins)
// restarted, or after the supervisor started a provider plugin again. One
// the provider no longer knows is forgotten (and made again if it is
// still assigned).
func (r *assignmentRunner) recover(ctx context.Context, only map[string]bool) {
	changed := false
	r.mu.Lock()
	held := slices.Collect(maps.Values(r.held))
	r.mu.Unlock()
	for _, h := range held {
		if only != nil && !only[h.Provider] {
			continue
		}
		err := r.do(ctx, h.Provider, func(ctx context.Context, c *base.Conn) error {
			_, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: h.Compute,
				Handle: &pluginv1.Handle{Version: h.HandleVersion, Driver: h.HandleDriver, State: h.HandleState}})
			return err
		})
		switch {
		case err == nil:
			r.log.Info("resource recovered", "compute", h.Compute, "provider", h.Provider)
		case grpcstatus.Code(err) == codes.NotFound:
			r.log.Warn("a kept resource is gone; it is made again if still assigned", "compute", h.Compute)
			r.mu.Lock()
			delete(r.held, h.Compute)
			r.mu.Unlock()
			changed = true
		case grpcstatus.Code(err) == codes.Unimplemented:
		default:
			r.log.Warn("recovering a resource failed; its assignment is applied again", "compute", h.Compute, "err", err)
		}
	}
	if changed {
		r.save()
	}
}

// listing is what the providers listed of this node's resources: per
// provider whether its List answered, and every listed resource by id.
type listing struct {
	answered map[string]bool
	byID     map[string]listedResource
}

type listedResource struct {
	provider string
	res      *pluginv1.Resource
}

// list asks every provider for the resources carrying this node's owner
// label. A provider without List (or whose List failed) is not answered:
// its assignments are then handed to it every time, as nothing shows that
// their resources still run.
func (r *assignmentRunner) list(ctx context.Context) listing {
	l := listing{answered: map[string]bool{}, byID: map[string]listedResource{}}
	for _, provider := range r.providers {
		var listed []*pluginv1.Resource
		err := r.do(ctx, provider, func(ctx context.Context, c *base.Conn) error {
			resp, err := c.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{LabelNode: r.node}})
			listed = resp.GetResources()
			return err
		})
		if err != nil {
			if grpcstatus.Code(err) != codes.Unimplemented {
				r.log.Warn("listing a provider's resources failed", "provider", provider, "err", err)
			}
			continue
		}
		l.answered[provider] = true
		for _, res := range listed {
			if res.GetState() != pluginv1.ResourceState_RESOURCE_STATE_DELETED {
				l.byID[res.GetId()] = listedResource{provider, res}
			}
		}
	}
	return l
}

// reconcile makes the provider's resources match the assignments, both
// ways: each assignment to run is created (idempotently on its compute's
// name) unless the held resource already realizes its generation and its
// provider still lists it, each to delete is deleted, and each resource
// with this node's owner labels that no assignment wants (a stray) is
// deleted. It returns the state of every assignment.
func (r *assignmentRunner) reconcile(ctx context.Context, as []*unyov1.Assignment) []*unyov1.AssignmentState {
	r.ports.update(as)
	wanted := map[string]bool{}
	for _, as := range as {
		if as.GetDesired() != desiredDeleted {
			wanted[as.GetCompute()] = true
		}
	}
	listed := r.list(ctx)
	changed := false
	states := make([]*unyov1.AssignmentState, len(as))
	var work []int // the assignments the provider acts on, by index
	for i, as := range as {
		name := as.GetCompute()
		r.mu.Lock()
		h, isHeld := r.held[name]
		realized := isHeld && h.Generation == as.GetGeneration() && h.Provider == as.GetProvider()
		r.mu.Unlock()
		lr, isListed := listed.byID[name]
		isListed = isListed && lr.provider == as.GetProvider()
		gone := !isHeld && listed.answered[as.GetProvider()] && !isListed
		switch {
		case as.GetDesired() != desiredDeleted && as.GetLoadbalancer() != nil:
			// A load balancer at its generation is the poller's to read
			// (loadbalancers.go); otherwise applyLoadbalancer creates,
			// updates or reads it.
			if st := r.lbKnown(as); st != nil {
				states[i] = st
			} else {
				work = append(work, i)
			}
		case as.GetDesired() == desiredDeleted && gone:
			states[i] = &unyov1.AssignmentState{Compute: name, State: stateDeleted}
		case as.GetDesired() != desiredDeleted && realized && isListed:
			// Running at this generation already: its state is what the
			// provider lists.
			states[i] = resourceState(as, lr.res)
		case as.GetDesired() != desiredDeleted && r.failed[name] != nil && r.failed[name].GetGeneration() == as.GetGeneration():
			states[i] = proto.CloneOf(r.failed[name])
		default:
			work = append(work, i)
		}
	}
	// The provider's work, realizeParallel at a time; each compute appears
	// once in as, and passes do not overlap, so no two calls for one
	// compute are ever in flight together.
	var wg sync.WaitGroup
	sem := make(chan struct{}, realizeParallel)
	for _, i := range work {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			switch {
			case as[i].GetDesired() == desiredDeleted:
				states[i] = r.remove(ctx, as[i].GetProvider(), as[i].GetCompute())
			case as[i].GetLoadbalancer() != nil:
				states[i] = r.applyLoadbalancer(ctx, as[i]) // loadbalancers.go
			default:
				states[i] = r.create(ctx, as[i])
			}
		}()
	}
	wg.Wait()
	for _, i := range work {
		name := as[i].GetCompute()
		delete(r.failed, name)
		if st := states[i]; st.GetState() == stateFailed && as[i].GetDesired() != desiredDeleted {
			r.mu.Lock()
			_, isHeld := r.held[name]
			r.mu.Unlock()
			if !isHeld {
				r.failed[name] = st
			}
		}
		changed = true
	}
	now := timestamppb.Now()
	for i, st := range states {
		st.Generation, st.UpdatedAt = as[i].GetGeneration(), now
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
	for id, lr := range listed.byID {
		if !wanted[id] && lr.res.GetLabels()[LabelCluster] == r.cluster() {
			strays[id] = lr.provider
		}
	}
	for name, provider := range strays {
		if st := r.remove(ctx, provider, name); st.GetState() == stateDeleted {
			r.log.Info("stray resource deleted", "compute", name, "provider", provider)
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
	labels := map[string]string{LabelCluster: r.cluster(), LabelNode: r.node, LabelCompute: as.GetCompute(), LabelService: as.GetService()}
	var res *pluginv1.Resource
	err := r.do(ctx, as.GetProvider(), func(ctx context.Context, c *base.Conn) error {
		keys, err := r.providerKeys(ctx, as.GetProvider(), c)
		if err != nil {
			return err
		}
		cfg, err := commandEnv(as, keys)
		if err != nil {
			return err
		}
		f, err := r.ports.facts(as, facts(as))
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
		return &unyov1.AssignmentState{Compute: as.GetCompute(), Address: as.GetAddress(),
			State: stateFailed, Message: fmt.Sprintf("provider %s: %v", as.GetProvider(), err)}
	}
	h := res.GetHandle()
	r.mu.Lock()
	r.held[as.GetCompute()] = &heldResource{Compute: as.GetCompute(), Provider: as.GetProvider(), Generation: as.GetGeneration(),
		HandleVersion: h.GetVersion(), HandleDriver: h.GetDriver(), HandleState: h.GetState()}
	r.mu.Unlock()
	return resourceState(as, res)
}

// resourceState is the state to report of an assignment's resource as its
// provider describes it.
func resourceState(as *unyov1.Assignment, res *pluginv1.Resource) *unyov1.AssignmentState {
	st := &unyov1.AssignmentState{Compute: as.GetCompute(), Address: as.GetAddress(),
		Handle: fmt.Sprintf("%s/%s", as.GetProvider(), res.GetId())}
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

// commandEnv is the resource config of an assignment's command and env:
// each goes to a provider whose resource schema names it, or names no key
// at all (it takes any config). A provider that names other keys and not
// these (provider-libvirt: a VM runs its image's init) refuses keys it does
// not name, so it gets neither, and an assignment that has a command or env
// for it fails saying so.
func commandEnv(as *unyov1.Assignment, keys map[string]bool) (map[string]any, error) {
	cfg := map[string]any{}
	open := len(keys) == 0
	switch {
	case keys["command"] || open:
		cfg["command"] = toAny(as.GetCommand())
	case len(as.GetCommand()) > 0:
		return nil, fmt.Errorf("provider %s takes no command (its resource schema names none); remove spec.compute.command", as.GetProvider())
	}
	if len(as.GetEnv()) > 0 {
		if !keys["env"] && !open {
			return nil, fmt.Errorf("provider %s takes no environment (its resource schema names none); remove spec.compute.env", as.GetProvider())
		}
		env := map[string]any{}
		for k, v := range as.GetEnv() {
			env[k] = v
		}
		cfg["env"] = env
	}
	return cfg, nil
}

// facts are what the cluster says of an assignment beyond its command and
// env, under the resource config keys providers use for them: the address
// root's IPAM allocated, the image and the flavor's shape and cpu_policy
// (provider-libvirt pins a pinned flavor's vCPUs). Each goes only
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
	add("cpu_policy", r.GetCpuPolicy(), r.GetCpuPolicy() != "")
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
