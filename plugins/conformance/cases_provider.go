package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// runLabel marks every resource the harness creates, so that strays can be
// found by List.
const runLabel = "unyo.conformance/run"

func providerCases() []testCase {
	k := pluginv1.Kind_KIND_PROVIDER
	return []testCase{
		{name: "provider/schema", kind: k, run: caseProviderSchema},
		{name: "provider/validate", kind: k, run: caseProviderValidate},
		{name: "provider/lifecycle", kind: k, run: caseProviderLifecycle},
		{name: "provider/create_idempotent", kind: k, run: caseProviderCreateIdempotent},
		{name: "provider/create_conflict_rejected", kind: k, run: caseProviderConflict},
		{name: "provider/delete_unknown_ok", kind: k, run: caseProviderDeleteUnknown},
		{name: "provider/get_unknown_not_found", kind: k, run: caseProviderGetUnknown},
		{name: "provider/recover_after_kill", kind: k, run: caseProviderRecover},
		{name: "provider/survives_plugin_crash", kind: k, run: caseProviderSurvivesCrash},
		{name: "provider/failed_create_leaves_nothing", kind: k, run: caseProviderFailedCreate},
		{name: "provider/parallel_creates", kind: k, run: caseProviderParallel},
		{name: "provider/list_by_labels", kind: k, run: caseProviderList},
		{name: "provider/update", kind: k, run: caseProviderUpdate},
		{name: "provider/stats", kind: k, run: caseProviderStats},
		{name: "provider/watch", kind: k, run: caseProviderWatch},
		{name: "provider/fingerprint", kind: k, run: caseProviderFingerprint},
		{name: "provider/unadvertised_unimplemented", kind: k, run: caseProviderUnadvertised},
		// Last: every case above deleted what it made.
		{name: "provider/no_strays", kind: k, run: caseProviderNoStrays},
	}
}

// resourceID names a resource of this run and case; tracked ones are
// deleted when the case ends.
func (c *C) resourceID(suffix string) string {
	return fmt.Sprintf("conf-%s-%s-%s", c.env.runID, lastElem(c.name), suffix)
}

func lastElem(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// track makes sure id is deleted when the case ends, however it ends: a
// fresh instance does it, since the case may have killed its own.
func (c *C) track(ids ...string) {
	c.Cleanup(func() {
		inst, err := c.target.start(context.Background(), startNormal)
		if err != nil {
			c.Errorf("cleanup: cannot start the plugin to delete %v: %v", ids, err)
			return
		}
		defer inst.close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := inst.configure(ctx, c.fx.Config); err != nil {
			c.Errorf("cleanup: %v", err)
			return
		}
		for _, id := range ids {
			if _, err := inst.conn.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: id, Grace: durationpb.New(2 * time.Second)}); err != nil {
				c.Errorf("cleanup: Delete %s: %v", id, err)
			}
		}
	})
}

func (c *C) needResource() {
	if c.fx.Provider.Resource == nil {
		c.needFixture("provider.resource")
	}
}

func (c *C) create(ctx context.Context, inst *instance, id string, cfg map[string]any) (*pluginv1.CreateResponse, error) {
	return inst.conn.Provider.Create(ctx, &pluginv1.CreateRequest{Id: id, Config: c.mustStruct(cfg),
		Labels: map[string]string{runLabel: c.env.runID, "unyo.conformance/case": lastElem(c.name)}})
}

func (c *C) schema(ctx context.Context, inst *instance) *pluginv1.SchemaResponse {
	s, err := inst.conn.Provider.Schema(ctx, &pluginv1.SchemaRequest{})
	if err != nil {
		c.Fatalf("Schema: %v", err)
	}
	return s
}

// startOffering starts a configured instance for a case about one
// operation, skipped when the plugin does not offer it (or, with
// resource, when there is no provider.resource fixture).
func (c *C) startOffering(op pluginv1.Operation, name string, resource bool) (*instance, context.Context, context.CancelFunc) {
	if resource {
		c.needResource()
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	if !offers(c.schema(ctx, inst), op) {
		cancel()
		c.Skipf("the plugin does not offer %s", name)
	}
	return inst, ctx, cancel
}

func offers(s *pluginv1.SchemaResponse, op pluginv1.Operation) bool {
	return slices.Contains(s.GetOperations(), op)
}

func caseProviderSchema(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	s := c.schema(ctx, inst)
	if !json.Valid([]byte(s.GetResourceSchema())) {
		c.Errorf("resource schema is not JSON: %q", s.GetResourceSchema())
	}
	if s.GetResourceType() == "" {
		c.Errorf("no resource_type")
	}
	for _, op := range []pluginv1.Operation{pluginv1.Operation_OPERATION_CREATE, pluginv1.Operation_OPERATION_DELETE} {
		if !offers(s, op) {
			c.Errorf("operations %v lack %v", s.GetOperations(), op)
		}
	}
	if offers(s, pluginv1.Operation_OPERATION_UNSPECIFIED) {
		c.Errorf("operations %v contain UNSPECIFIED", s.GetOperations())
	}
}

func caseProviderValidate(c *C) {
	c.needResource()
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	v, err := inst.conn.Provider.Validate(ctx, &pluginv1.ValidateRequest{Config: c.mustStruct(c.fx.Provider.Resource)})
	if err != nil || !v.GetValid() {
		c.Errorf("Validate of the resource fixture: %v %v, want valid", v, err)
	}
	if c.fx.Provider.Invalid == nil {
		c.log("no provider.invalid fixture: only the valid side checked")
		return
	}
	v, err = inst.conn.Provider.Validate(ctx, &pluginv1.ValidateRequest{Config: c.mustStruct(c.fx.Provider.Invalid)})
	if err != nil || v.GetValid() || len(v.GetProblems()) == 0 {
		c.Errorf("Validate of the invalid fixture: %v %v, want valid=false with problems (not an error)", v, err)
	}
}

func caseProviderLifecycle(c *C) {
	c.needResource()
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	id := c.resourceID("a")
	c.track(id)
	cr, err := c.create(ctx, inst, id, c.fx.Provider.Resource)
	if err != nil {
		c.Fatalf("Create: %v", err)
	}
	r := cr.GetResource()
	if !cr.GetCreated() || r.GetId() != id {
		c.Errorf("Create: created=%v id=%q, want created=true id=%q", cr.GetCreated(), r.GetId(), id)
	}
	if r.GetHandle().GetDriver() != c.info.GetName() {
		c.Errorf("handle driver %q, want the plugin name %q", r.GetHandle().GetDriver(), c.info.GetName())
	}
	if s := r.GetState(); s == pluginv1.ResourceState_RESOURCE_STATE_UNSPECIFIED || s == pluginv1.ResourceState_RESOURCE_STATE_DELETED {
		c.Errorf("created resource is in state %v", s)
	}
	g, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: id})
	if err != nil || g.GetResource().GetId() != id {
		c.Fatalf("Get after Create: %v %v", g, err)
	}
	if !proto.Equal(g.GetResource().GetConfig(), c.mustStruct(c.fx.Provider.Resource)) {
		c.Errorf("Get returns config %v, want the created one", g.GetResource().GetConfig())
	}
	d, err := inst.conn.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: id, Grace: durationpb.New(2 * time.Second)})
	if err != nil || !d.GetExisted() {
		c.Errorf("Delete: %v %v, want existed=true", d, err)
	}
	if _, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: id}); status.Code(err) != codes.NotFound {
		c.Errorf("Get after Delete: %v, want NOT_FOUND", err)
	}
	if d, err := inst.conn.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: id}); err != nil || d.GetExisted() {
		c.Errorf("second Delete: %v %v, want OK with existed=false", d, err)
	}
}

func caseProviderCreateIdempotent(c *C) {
	c.needResource()
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	id := c.resourceID("a")
	c.track(id)
	first, err := c.create(ctx, inst, id, c.fx.Provider.Resource)
	if err != nil {
		c.Fatalf("Create: %v", err)
	}
	for i := range 5 {
		again, err := c.create(ctx, inst, id, c.fx.Provider.Resource)
		if err != nil {
			c.Fatalf("Create #%d with the same id and config: %v", i+2, err)
		}
		if again.GetCreated() {
			c.Errorf("Create #%d with the same id and config says created=true", i+2)
		}
		if !proto.Equal(again.GetResource().GetHandle(), first.GetResource().GetHandle()) {
			c.Errorf("Create #%d returned another handle: %v, first %v", i+2, again.GetResource().GetHandle(), first.GetResource().GetHandle())
		}
	}
}

func caseProviderConflict(c *C) {
	c.needResource()
	if c.fx.Provider.Other == nil {
		c.needFixture("provider.other")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	id := c.resourceID("a")
	c.track(id)
	first, err := c.create(ctx, inst, id, c.fx.Provider.Resource)
	if err != nil {
		c.Fatalf("Create: %v", err)
	}
	if _, err := c.create(ctx, inst, id, c.fx.Provider.Other); status.Code(err) != codes.AlreadyExists {
		c.Errorf("Create with the same id and another config: %v, want ALREADY_EXISTS", err)
	}
	g, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: id})
	if err != nil || !proto.Equal(g.GetResource().GetConfig(), first.GetResource().GetConfig()) {
		c.Errorf("after the rejected Create the resource changed: %v %v", g, err)
	}
}

func caseProviderDeleteUnknown(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	d, err := inst.conn.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: c.resourceID("never")})
	if err != nil || d.GetExisted() {
		c.Errorf("Delete of an unknown id: %v %v, want OK with existed=false", d, err)
	}
}

func caseProviderGetUnknown(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	if _, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: c.resourceID("never")}); status.Code(err) != codes.NotFound {
		c.Errorf("Get of an unknown id: %v, want NOT_FOUND", err)
	}
}

// crashAndRestart creates a resource, kills the plugin without warning and
// starts a fresh instance.
func (c *C) crashAndRestart(ctx context.Context, id string) (*pluginv1.Resource, *instance) {
	inst := c.start(true)
	cr, err := c.create(ctx, inst, id, c.fx.Provider.Resource)
	if err != nil {
		c.Fatalf("Create: %v", err)
	}
	inst.kill()
	return cr.GetResource(), c.start(true)
}

func caseProviderRecover(c *C) {
	c.needResource()
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	if !offers(c.schema(ctx, c.start(true)), pluginv1.Operation_OPERATION_RECOVER) {
		c.Skipf("the plugin does not offer Recover")
	}
	id := c.resourceID("a")
	c.track(id)
	before, inst := c.crashAndRestart(ctx, id)
	r, err := inst.conn.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: id, Handle: before.GetHandle()})
	if err != nil {
		c.Fatalf("Recover after the plugin was killed: %v", err)
	}
	if r.GetResource().GetId() != id {
		c.Errorf("Recover returned resource %q, want %q", r.GetResource().GetId(), id)
	}
	if !proto.Equal(r.GetResource().GetConfig(), before.GetConfig()) {
		c.Errorf("Recover returned config %v, want %v", r.GetResource().GetConfig(), before.GetConfig())
	}
	bad := proto.Clone(before.GetHandle()).(*pluginv1.Handle)
	bad.Driver = "conformance-other-driver"
	if _, err := inst.conn.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: id, Handle: bad}); status.Code(err) != codes.FailedPrecondition {
		c.Errorf("Recover of another driver's handle: %v, want FAILED_PRECONDITION", err)
	}
}

func caseProviderSurvivesCrash(c *C) {
	c.needResource()
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	id := c.resourceID("a")
	c.track(id)
	before, inst := c.crashAndRestart(ctx, id)
	g, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: id})
	if err != nil {
		c.Fatalf("Get after the plugin was killed: %v", err)
	}
	after := g.GetResource()
	if before.GetState() == pluginv1.ResourceState_RESOURCE_STATE_RUNNING && after.GetState() != before.GetState() {
		c.Errorf("resource was %v before the plugin crash and %v after (%s)", before.GetState(), after.GetState(), after.GetReason())
	}
	for k, v := range before.GetAttributes() {
		if after.GetAttributes()[k] != v {
			c.Errorf("attribute %s was %q before the plugin crash and %q after", k, v, after.GetAttributes()[k])
		}
	}
}

func caseProviderFailedCreate(c *C) {
	if c.fx.Provider.Failing == nil {
		c.needFixture("provider.failing")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	id := c.resourceID("a")
	c.track(id)
	if _, err := c.create(ctx, inst, id, c.fx.Provider.Failing); err == nil {
		c.Fatalf("Create with the failing fixture succeeded")
	}
	if _, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: id}); status.Code(err) != codes.NotFound {
		c.Errorf("Get after a failed Create: %v, want NOT_FOUND", err)
	}
	if offers(c.schema(ctx, inst), pluginv1.Operation_OPERATION_LIST) {
		l, err := inst.conn.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{runLabel: c.env.runID, "unyo.conformance/case": lastElem(c.name)}})
		if err != nil || len(l.GetResources()) != 0 {
			c.Errorf("List after a failed Create: %v %v, want nothing", l, err)
		}
	}
	if d, err := inst.conn.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: id}); err != nil || d.GetExisted() {
		c.Errorf("Delete after a failed Create: %v %v, want existed=false", d, err)
	}
}

func caseProviderParallel(c *C) {
	c.needResource()
	inst := c.start(true)
	ctx, cancel := c.timeout(60 * time.Second)
	defer cancel()
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = c.resourceID(fmt.Sprintf("p%d", i))
	}
	same := c.resourceID("same")
	c.track(append(ids, same)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			r, err := c.create(ctx, inst, ids[i], c.fx.Provider.Resource)
			if err != nil || !r.GetCreated() || r.GetResource().GetId() != ids[i] {
				c.Errorf("parallel Create %s: %v %v", ids[i], r, err)
			}
		}()
		go func() {
			defer wg.Done()
			r, err := c.create(ctx, inst, same, c.fx.Provider.Resource)
			if err != nil {
				c.Errorf("parallel Create of one id: %v", err)
				return
			}
			if r.GetCreated() {
				mu.Lock()
				created++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if created != 1 {
		c.Errorf("%d parallel Creates of one id: %d said created, want exactly 1", n, created)
	}
	for _, id := range ids {
		if _, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: id}); err != nil {
			c.Errorf("Get %s after parallel creates: %v", id, err)
		}
	}
}

func caseProviderList(c *C) {
	inst, ctx, cancel := c.startOffering(pluginv1.Operation_OPERATION_LIST, "List", true)
	defer cancel()
	// Two resources sharing the run's label but not the case's: a List
	// matching ANY of the labels instead of ALL returns both.
	a, b := c.resourceID("a"), c.resourceID("b")
	c.track(a, b)
	for _, r := range []struct{ id, which string }{{a, "a"}, {b, "b"}} {
		if _, err := inst.conn.Provider.Create(ctx, &pluginv1.CreateRequest{Id: r.id, Config: c.mustStruct(c.fx.Provider.Resource),
			Labels: map[string]string{runLabel: c.env.runID, "unyo.conformance/case": lastElem(c.name) + "-" + r.which}}); err != nil {
			c.Fatalf("Create %s: %v", r.id, err)
		}
	}
	l, err := inst.conn.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{runLabel: c.env.runID, "unyo.conformance/case": lastElem(c.name) + "-a"}})
	if err != nil || len(l.GetResources()) != 1 || l.GetResources()[0].GetId() != a {
		c.Errorf("List by two labels returned %v (%v), want exactly %s: a resource must match ALL the labels, not any", resourceIDs(l.GetResources()), err, a)
	}
	l, err = inst.conn.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{runLabel: "conformance-nobody"}})
	if err != nil || len(l.GetResources()) != 0 {
		c.Errorf("List by a label nobody has: %v %v, want nothing", resourceIDs(l.GetResources()), err)
	}
}

func resourceIDs(rs []*pluginv1.Resource) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.GetId())
	}
	return ids
}

// caseProviderNoStrays lists what still carries this run's label once
// every case has deleted what it made: duplicates of a non-idempotent
// Create, or resources a Delete left behind.
func caseProviderNoStrays(c *C) {
	inst, ctx, cancel := c.startOffering(pluginv1.Operation_OPERATION_LIST, "List", false)
	defer cancel()
	l, err := inst.conn.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{runLabel: c.env.runID}})
	if err != nil {
		c.Fatalf("List by the run's label: %v", err)
	}
	if ids := resourceIDs(l.GetResources()); len(ids) > 0 {
		c.track(ids...)
		c.Errorf("%d resources of this run are left after every case deleted what it created (strays: duplicates or resources Delete left behind): %v", len(ids), ids)
	}
}

// caseProviderUpdate: PlanUpdate and Update of a resource, and the update
// is stored: Get afterwards returns the new config.
func caseProviderUpdate(c *C) {
	inst, ctx, cancel := c.startOffering(pluginv1.Operation_OPERATION_UPDATE, "Update", true)
	defer cancel()
	if c.fx.Provider.Other == nil {
		c.needFixture("provider.other")
	}
	p := inst.conn.Provider
	unknown := c.resourceID("never")
	if _, err := p.PlanUpdate(ctx, &pluginv1.PlanUpdateRequest{Id: unknown, Config: c.mustStruct(c.fx.Provider.Other)}); status.Code(err) != codes.NotFound {
		c.Errorf("PlanUpdate of an unknown id: got %v, want NOT_FOUND", err)
	}
	if _, err := p.Update(ctx, &pluginv1.UpdateRequest{Id: unknown, Config: c.mustStruct(c.fx.Provider.Other)}); status.Code(err) != codes.NotFound {
		c.Errorf("Update of an unknown id: got %v, want NOT_FOUND", err)
	}
	id := c.resourceID("u")
	c.track(id)
	if _, err := c.create(ctx, inst, id, c.fx.Provider.Resource); err != nil {
		c.Fatalf("Create: %v", err)
	}
	plan, err := p.PlanUpdate(ctx, &pluginv1.PlanUpdateRequest{Id: id, Config: c.mustStruct(c.fx.Provider.Other)})
	if err != nil {
		c.Fatalf("PlanUpdate: %v", err)
	}
	if plan.GetAction() == pluginv1.UpdateAction_UPDATE_ACTION_UNSPECIFIED || plan.GetAction() == pluginv1.UpdateAction_UPDATE_ACTION_NOOP {
		c.Errorf("PlanUpdate to another config plans %v, want IN_PLACE or REPLACE", plan.GetAction())
	}
	up, err := p.Update(ctx, &pluginv1.UpdateRequest{Id: id, Config: c.mustStruct(c.fx.Provider.Other)})
	if err != nil {
		c.Fatalf("Update: %v", err)
	}
	want := c.mustStruct(c.fx.Provider.Other)
	if !proto.Equal(up.GetResource().GetConfig(), want) {
		c.Errorf("Update answered config %v, want %v", up.GetResource().GetConfig(), want)
	}
	g, err := p.Get(ctx, &pluginv1.GetRequest{Id: id})
	if err != nil {
		c.Fatalf("Get after Update: %v", err)
	}
	if !proto.Equal(g.GetResource().GetConfig(), want) {
		c.Errorf("Get after Update returns config %v, want the updated %v: the update was answered but not stored", g.GetResource().GetConfig(), want)
	}
}

// caseProviderStats: Stats of a resource answers, of an unknown id is
// NOT_FOUND.
func caseProviderStats(c *C) {
	inst, ctx, cancel := c.startOffering(pluginv1.Operation_OPERATION_STATS, "Stats", true)
	defer cancel()
	if _, err := inst.conn.Provider.Stats(ctx, &pluginv1.StatsRequest{Id: c.resourceID("never")}); status.Code(err) != codes.NotFound {
		c.Errorf("Stats of an unknown id: got %v, want NOT_FOUND", err)
	}
	id := c.resourceID("s")
	c.track(id)
	if _, err := c.create(ctx, inst, id, c.fx.Provider.Resource); err != nil {
		c.Fatalf("Create: %v", err)
	}
	if _, err := inst.conn.Provider.Stats(ctx, &pluginv1.StatsRequest{Id: id}); err != nil {
		c.Errorf("Stats of a running resource: %v", err)
	}
}

// caseProviderWatch: Watch stays open and reports the watched resource's
// deletion or at least does not fail.
func caseProviderWatch(c *C) {
	inst, ctx, cancel := c.startOffering(pluginv1.Operation_OPERATION_WATCH, "Watch", true)
	defer cancel()
	id := c.resourceID("w")
	c.track(id)
	if _, err := c.create(ctx, inst, id, c.fx.Provider.Resource); err != nil {
		c.Fatalf("Create: %v", err)
	}
	const watchFor = 500 * time.Millisecond
	wctx, wcancel := context.WithTimeout(ctx, watchFor)
	defer wcancel()
	began := time.Now()
	st, err := inst.conn.Provider.Watch(wctx, &pluginv1.WatchRequest{Ids: []string{id}})
	if err != nil {
		c.Fatalf("Watch: %v", err)
	}
	for {
		r, err := st.Recv()
		switch {
		case status.Code(err) == codes.DeadlineExceeded || wctx.Err() != nil || (err != nil && time.Since(began) > watchFor-100*time.Millisecond):
			// Still watching when the harness stopped: the plugin may see
			// the deadline a moment before the harness and end cleanly.
			return
		case status.Code(err) == codes.Unimplemented:
			c.Fatalf("%s", advertisedButUnimplemented("Watch", err))
		case err != nil:
			c.Fatalf("Watch ended while the harness was still watching: %v", err)
		case r.GetId() != id:
			c.Errorf("Watch of %s reported resource %q", id, r.GetId())
		}
	}
}

// caseProviderFingerprint: Fingerprint streams at least one fingerprint.
func caseProviderFingerprint(c *C) {
	inst, ctx, cancel := c.startOffering(pluginv1.Operation_OPERATION_FINGERPRINT, "Fingerprint", false)
	defer cancel()
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	st, err := inst.conn.Provider.Fingerprint(fctx, &pluginv1.FingerprintRequest{Interval: durationpb.New(time.Second)})
	if err != nil {
		c.Fatalf("Fingerprint: %v", err)
	}
	r, err := st.Recv()
	if status.Code(err) == codes.Unimplemented {
		c.Fatalf("%s", advertisedButUnimplemented("Fingerprint", err))
	}
	if err != nil {
		c.Fatalf("Fingerprint sent nothing within 5s: %v", err)
	}
	if r.GetAt() == nil {
		c.Errorf("fingerprint without its time: %v", r)
	}
}

// advertisedButUnimplemented says that an operation in Schema's operations
// is not served: the host would rely on it.
func advertisedButUnimplemented(op string, err error) string {
	return fmt.Sprintf("%s is advertised in Schema's operations but answered UNIMPLEMENTED: %v", op, err)
}

// caseProviderUnadvertised calls every operation missing from Schema and
// wants UNIMPLEMENTED.
func caseProviderUnadvertised(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	s := c.schema(ctx, inst)
	p := inst.conn.Provider
	id := c.resourceID("never")
	recvErr := func(recv func() error, err error) error {
		if err != nil {
			return err
		}
		err = recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	calls := map[pluginv1.Operation]func(context.Context) error{
		pluginv1.Operation_OPERATION_FINGERPRINT: func(ctx context.Context) error {
			st, err := p.Fingerprint(ctx, &pluginv1.FingerprintRequest{})
			return recvErr(func() error { _, err := st.Recv(); return err }, err)
		},
		pluginv1.Operation_OPERATION_UPDATE: func(ctx context.Context) error {
			_, err := p.Update(ctx, &pluginv1.UpdateRequest{Id: id, Config: c.mustStruct(c.fx.Provider.Resource)})
			if status.Code(err) == codes.Unimplemented {
				_, err = p.PlanUpdate(ctx, &pluginv1.PlanUpdateRequest{Id: id})
			}
			return err
		},
		pluginv1.Operation_OPERATION_LIST: func(ctx context.Context) error {
			_, err := p.List(ctx, &pluginv1.ListRequest{})
			return err
		},
		pluginv1.Operation_OPERATION_RECOVER: func(ctx context.Context) error {
			_, err := p.Recover(ctx, &pluginv1.RecoverRequest{Id: id, Handle: &pluginv1.Handle{Version: 1, Driver: c.info.GetName()}})
			return err
		},
		pluginv1.Operation_OPERATION_WATCH: func(ctx context.Context) error {
			st, err := p.Watch(ctx, &pluginv1.WatchRequest{Ids: []string{id}})
			return recvErr(func() error { _, err := st.Recv(); return err }, err)
		},
		pluginv1.Operation_OPERATION_STATS: func(ctx context.Context) error {
			_, err := p.Stats(ctx, &pluginv1.StatsRequest{Id: id})
			return err
		},
	}
	checked := 0
	for op, call := range calls {
		if offers(s, op) {
			continue
		}
		checked++
		// A stream that is offered would run until cancelled; one that
		// is not answers at once.
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		err := call(cctx)
		ccancel()
		if status.Code(err) != codes.Unimplemented {
			c.Errorf("%v is not advertised but answered %v, want UNIMPLEMENTED", op, err)
		}
	}
	c.log("%d unadvertised operations checked", checked)
}
