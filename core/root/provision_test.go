package root

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/provision/service"
)

// fakeClusters stands in for the clusters' side of the contract: each
// cluster holds exactly the Computes of the latest SyncComputes, Active on
// its first node, or Blocked with NoCapacity when the cluster is full.
type fakeClusters struct {
	mu    sync.Mutex
	nodes map[string][]*unyov1.Node
	full  map[string]bool
	held  map[string][]*unyov1.Compute
	lbs   map[string][]*unyov1.Loadbalancer
	syncs map[string]int
	// events are the service events root had each cluster record.
	events map[string][]*unyov1.RecordServiceEventRequest
}

func newFakeClusters(names ...string) *fakeClusters {
	f := &fakeClusters{nodes: map[string][]*unyov1.Node{}, full: map[string]bool{}, held: map[string][]*unyov1.Compute{}, lbs: map[string][]*unyov1.Loadbalancer{}, syncs: map[string]int{},
		events: map[string][]*unyov1.RecordServiceEventRequest{}}
	for _, n := range names {
		f.nodes[n] = []*unyov1.Node{{Name: n + "-node", State: unyov1.NodeState_NODE_STATE_READY,
			Capacity: &unyov1.Capacity{Cpus: 16, MemoryBytes: 64 << 30, DiskBytes: 1 << 40}}}
	}
	return f
}

func (f *fakeClusters) Clusters(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeClusters) ListNodes(_ context.Context, cluster string) ([]*unyov1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[cluster], nil
}

func (f *fakeClusters) SyncComputes(_ context.Context, cluster string, want *unyov1.SyncComputesRequest) (*unyov1.SyncComputesResponse, error) {
	cs := want.GetComputes()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs[cluster]++
	var out []*unyov1.Compute
	for _, c := range cs {
		if c.GetStatus() != nil || c.GetCluster() != cluster || c.GetResources().GetVcpus() == 0 || c.GetImageSource() == "" {
			return nil, fmt.Errorf("root sent %s to %s with cluster %q, status %v, resources %v, image %q", c.GetName(), cluster, c.GetCluster(), c.GetStatus(), c.GetResources(), c.GetImageSource())
		}
		h := proto.Clone(c).(*unyov1.Compute)
		h.Status = &unyov1.ComputeStatus{Phase: service.PhaseActive, Node: cluster + "-node", Address: "10.0.0." + fmt.Sprint(c.GetIndex()+10)}
		if f.full[cluster] {
			h.Status = &unyov1.ComputeStatus{Phase: service.PhaseBlocked, Reason: service.ReasonNoCapacity, Message: "0/1 nodes fit: 1 insufficient memory"}
		}
		out = append(out, h)
	}
	f.held[cluster] = out
	var lbs []*unyov1.Loadbalancer
	for _, l := range want.GetLoadbalancers() {
		h := proto.CloneOf(l)
		h.Status = &unyov1.LoadbalancerStatus{Phase: service.PhaseActive, Node: cluster + "-node"}
		lbs = append(lbs, h)
	}
	f.lbs[cluster] = lbs
	return &unyov1.SyncComputesResponse{Computes: out, Loadbalancers: lbs}, nil
}

func (f *fakeClusters) RecordServiceEvent(_ context.Context, cluster string, e *unyov1.RecordServiceEventRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events[cluster] = append(f.events[cluster], e)
	return nil
}

// heldNames are the computes a cluster holds, sorted.
func (f *fakeClusters) heldNames(cluster string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.held[cluster] {
		out = append(out, c.GetName())
	}
	slices.Sort(out)
	return out
}

type controllerFixture struct {
	t     *testing.T
	st    *sqlstore.Store
	fake  *fakeClusters
	c     *serviceController
	clock time.Time
}

func newControllerFixture(t *testing.T, clusters ...string) *controllerFixture {
	st := openStore(t, "root.db")
	fake := newFakeClusters(clusters...)
	f := &controllerFixture{t: t, st: st, fake: fake, clock: time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)}
	f.c = newServiceController(st, fake, &sync.Mutex{}, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.c.now = func() time.Time { return f.clock }
	weights := map[string]int32{"c1": 1, "c2": 2, "c3": 1}
	objs := []*unyov1.Object{
		kinds.Wrap(&unyov1.Region{Name: "tokyo"}),
		kinds.Wrap(&unyov1.Flavor{Name: "small", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 2, Memory: "4Gi", Disk: "10Gi"}}),
		kinds.Wrap(&unyov1.Image{Name: "web", Spec: &unyov1.ImageSpec{Kind: "container", Source: "/bin/sleep"}}),
	}
	for _, c := range clusters {
		objs = append(objs, kinds.Wrap(&unyov1.Cluster{Name: c, Spec: &unyov1.ClusterSpec{Region: "tokyo", Weight: weights[c]}}))
	}
	f.put(objs...)
	return f
}

func (f *controllerFixture) put(objs ...*unyov1.Object) {
	f.t.Helper()
	if _, err := f.st.PutObjects(context.Background(), objs); err != nil {
		f.t.Fatal(err)
	}
}

func webService(replicas int32) *unyov1.RegionService {
	return &unyov1.RegionService{Name: "web", Spec: &unyov1.RegionServiceSpec{Region: "tokyo",
		Compute: &unyov1.ComputeSpec{Flavor: "small", Image: "web", Provider: "exec", Replicas: replicas}}}
}

// apply stores a service the way root's Apply does: with the status root
// holds.
func (f *controllerFixture) apply(s *unyov1.RegionService) {
	f.t.Helper()
	objs := []*unyov1.Object{kinds.Wrap(s)}
	r := &Root{store: f.st}
	if err := r.keepServiceStatus(context.Background(), objs); err != nil {
		f.t.Fatal(err)
	}
	f.put(objs...)
}

func (f *controllerFixture) pass() {
	f.t.Helper()
	if err := f.c.pass(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// computes renders root's records as "NAME CLUSTER PHASE REASON".
func (f *controllerFixture) computes() string {
	f.t.Helper()
	objs, err := f.st.ListObjects(context.Background(), service.KindCompute)
	if err != nil {
		f.t.Fatal(err)
	}
	var lines []string
	for _, o := range objs {
		c := o.GetCompute()
		lines = append(lines, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", c.GetName(), c.GetCluster(), c.GetStatus().GetPhase(), c.GetStatus().GetReason())))
	}
	return strings.Join(lines, "; ")
}

func (f *controllerFixture) status() *unyov1.RegionServiceStatus {
	f.t.Helper()
	o, err := f.st.GetObject(context.Background(), service.KindService, "web")
	if err != nil {
		f.t.Fatal(err)
	}
	return o.GetRegionService().GetStatus()
}

func TestControllerPlacesScalesAndDeletes(t *testing.T) {
	f := newControllerFixture(t, "c1", "c2")
	f.apply(webService(3))
	f.pass()
	// c2 weighs more: the whole set goes there, and its answer is copied.
	if got, want := f.computes(), "web-0 c2 Active; web-1 c2 Active; web-2 c2 Active"; got != want {
		t.Fatalf("computes = %s, want %s", got, want)
	}
	if st := f.status(); st.GetPhase() != service.PhaseActive || st.GetActive() != 3 || st.GetReplicas() != 3 {
		t.Fatalf("service status = %v, want Active 3/3", st)
	}
	objs, _ := f.st.ListObjects(context.Background(), service.KindCompute)
	if c := objs[1].GetCompute(); c.GetResources().GetMemoryBytes() != 4<<30 || c.GetImageSource() != "/bin/sleep" || c.GetStatus().GetAddress() != "10.0.0.11" {
		t.Errorf("web-1 = %v; want the flavor's shape, the image's source and the cluster's address", c)
	}

	// Applying the same document again changes nothing (the status stays).
	f.apply(webService(3))
	if st := f.status(); st.GetPhase() != service.PhaseActive {
		t.Fatalf("after re-applying, status = %v", st)
	}

	// Scale up: the new replicas join the set's cluster.
	f.apply(webService(5))
	f.pass()
	if got, want := f.computes(), "web-0 c2 Active; web-1 c2 Active; web-2 c2 Active; web-3 c2 Active; web-4 c2 Active"; got != want {
		t.Fatalf("after scaling to 5: %s, want %s", got, want)
	}

	// Scale down removes from the tail: Deleting, then gone once the
	// cluster's answer lacks them.
	f.apply(webService(2))
	f.pass()
	if got, want := f.computes(), "web-0 c2 Active; web-1 c2 Active"; got != want {
		t.Fatalf("after scaling to 2: %s, want %s", got, want)
	}
	if got := f.fake.heldNames("c2"); !slices.Equal(got, []string{"web-0", "web-1"}) {
		t.Fatalf("c2 holds %v", got)
	}

	// Deleting one replica by name keeps the others' indexes.
	r := &Root{store: f.st, svcMu: sync.Mutex{}, nudgeServices: make(chan struct{}, 1)}
	if res, err := r.deleteCompute(context.Background(), "web-0"); err != nil || res.GetAction() != "deleting" {
		t.Fatalf("deleteCompute = %v, %v", res, err)
	}
	if got := f.computes(); got != "web-0 c2 Deleting; web-1 c2 Active" {
		t.Fatalf("after deleting web-0: %s", got)
	}
	f.pass()
	if got := f.computes(); got != "web-1 c2 Active" {
		t.Fatalf("after the pass: %s", got)
	}
	if st := f.status(); st.GetReplicas() != 1 || st.GetPhase() != service.PhaseActive {
		t.Fatalf("service status = %v, want Active 1/1", st)
	}
	// Scaling up again fills the lowest free index.
	o, _ := f.st.GetObject(context.Background(), service.KindService, "web")
	o.GetRegionService().Spec.Compute.Replicas = 2
	f.put(o)
	f.pass()
	if got := f.computes(); got != "web-0 c2 Active; web-1 c2 Active" {
		t.Fatalf("after scaling to 2 again: %s", got)
	}

	// Deleting the service deletes its computes, then the service.
	if res, err := r.deleteService(context.Background(), "web"); err != nil || res.GetAction() != "deleting" {
		t.Fatalf("deleteService = %v, %v", res, err)
	}
	f.pass()
	if got := f.computes(); got != "" {
		t.Fatalf("computes left after deleting the service: %s", got)
	}
	if _, err := f.st.GetObject(context.Background(), service.KindService, "web"); err == nil {
		t.Fatal("the service is still stored")
	}
	if got := f.fake.heldNames("c2"); len(got) != 0 {
		t.Fatalf("c2 still holds %v", got)
	}
}

func TestControllerDeletesAtZero(t *testing.T) {
	f := newControllerFixture(t, "c1")
	f.apply(webService(1))
	f.pass()
	r := &Root{store: f.st, nudgeServices: make(chan struct{}, 1)}
	if _, err := r.deleteCompute(context.Background(), "web-0"); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if _, err := f.st.GetObject(context.Background(), service.KindService, "web"); err == nil {
		t.Fatal("a service whose last compute was deleted is still stored")
	}
}

// TestControllerPassesTurnedDownReplicasOn: c2 (the heavier cluster)
// answers Blocked with NoCapacity; root passes the set to c1, and stops
// after service.MaxHandoffs when every cluster is full.
func TestControllerPassesTurnedDownReplicasOn(t *testing.T) {
	f := newControllerFixture(t, "c1", "c2")
	f.fake.full["c2"] = true
	f.apply(webService(2))
	f.pass()
	if got := f.computes(); got != "web-0  Initializing; web-1  Initializing" {
		t.Fatalf("after c2 turned them down: %s", got)
	}
	if st := f.status(); st.GetPhase() != service.PhaseInitializing {
		t.Fatalf("status = %v", st)
	}
	f.pass()
	if got := f.computes(); got != "web-0 c1 Active; web-1 c1 Active" {
		t.Fatalf("after the hand-off: %s", got)
	}

	g := newControllerFixture(t, "c1", "c2", "c3")
	for _, c := range []string{"c1", "c2", "c3"} {
		g.fake.full[c] = true
	}
	g.apply(webService(1))
	for range 6 {
		g.pass()
	}
	if g.c.handoffs["web"] != service.MaxHandoffs {
		t.Errorf("handoffs = %d, want the bound %d", g.c.handoffs["web"], service.MaxHandoffs)
	}
	if got := g.computes(); !strings.HasSuffix(got, "Blocked NoCapacity") || strings.HasPrefix(got, "web-0  ") {
		t.Fatalf("after every cluster turned it down: %s; want it Blocked in a cluster", got)
	}
	if st := g.status(); st.GetPhase() != service.PhaseBlocked || st.GetReason() != service.ReasonNoCapacity || !strings.Contains(st.GetMessage(), "insufficient memory") {
		t.Fatalf("service status = %v", st)
	}
}

// TestControllerClusterStageReasons: no cluster in the service's region:
// the replicas fail at once with the cluster stage's reason per cluster.
func TestControllerClusterStageReasons(t *testing.T) {
	f := newControllerFixture(t, "c1")
	f.put(kinds.Wrap(&unyov1.Region{Name: "osaka"}))
	s := webService(2)
	s.Spec.Region = "osaka"
	f.apply(s)
	f.pass()
	if got := f.computes(); got != "web-0  Failed Unsatisfiable; web-1  Failed Unsatisfiable" {
		t.Fatalf("computes = %s", got)
	}
	st := f.status()
	if st.GetPhase() != service.PhaseFailed || !strings.Contains(st.GetMessage(), `0/1 clusters fit 2 replicas: c1 in region "tokyo"`) {
		t.Fatalf("status = %v", st)
	}
	o, _ := f.st.GetObject(context.Background(), service.KindCompute, "web-0")
	if rs := o.GetCompute().GetStatus().GetReasons(); len(rs) != 1 || rs[0].GetCode() != "c1" {
		t.Errorf("reasons = %v, want one per cluster", rs)
	}
	if n := f.fake.syncs["c1"]; n != 1 {
		t.Errorf("c1 was synced %d times, want once (with an empty list)", n)
	}
}

// A flavor larger than every node of every eligible cluster fails at once
// at root, with a placement event (session 9: "c1 fits 0" left it Blocked
// forever); one that fits a node's whole capacity but not its free
// capacity waits Blocked.
func TestControllerFlavorLargerThanEveryNode(t *testing.T) {
	f := newControllerFixture(t, "c1", "c3")
	f.put(kinds.Wrap(&unyov1.Flavor{Name: "monster", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 2, Memory: "128Gi"}}),
		kinds.Wrap(&unyov1.Flavor{Name: "big", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 2, Memory: "48Gi"}}))
	for _, ns := range f.fake.nodes {
		ns[0].Reserved = &unyov1.Capacity{MemoryBytes: 32 << 30}
	}
	s := webService(1)
	s.Spec.Compute.Flavor = "monster"
	f.apply(s)
	f.pass()
	if got := f.computes(); got != "web-0  Failed Unsatisfiable" {
		t.Fatalf("computes = %s", got)
	}
	ev := f.fake.events["c1"]
	if len(ev) != 1 || ev[0].GetCheck() != "compute-placement" || ev[0].GetStatus() != "critical" || ev[0].GetLabels()["compute"] != "web-0" ||
		!strings.Contains(ev[0].GetOutput(), "compute web-0: 0/2 clusters fit 1 replicas: c1 fits 0 (0/1 nodes fit: 1 too small for memory (need 128 GiB; largest has 64 GiB))") {
		t.Fatalf("events = %v, want one placement event in c1", ev)
	}
	f.pass()
	if n := len(f.fake.events["c1"]); n != 1 {
		t.Errorf("%d events after a second pass, want the one: an unchanged status raises none", n)
	}

	s = webService(1)
	s.Spec.Compute.Flavor = "big"
	f.apply(s)
	f.clock = f.clock.Add(time.Minute)
	f.pass()
	if got := f.computes(); got != "web-0  Blocked NoCapacity" {
		t.Fatalf("computes = %s, want Blocked: 48 GiB fits a node's 64 but not its 32 free", got)
	}
}

// TestControllerSendsTheFullList: every SyncComputes carries every Compute
// root wants in that cluster, of every service, so that a cluster deletes
// exactly what is absent.
func TestControllerSendsTheFullList(t *testing.T) {
	f := newControllerFixture(t, "c1")
	f.apply(webService(2))
	api := webService(1)
	api.Name = "api"
	f.apply(api)
	f.pass()
	f.pass() // a steady pass sends the same list again
	if got := f.fake.heldNames("c1"); !slices.Equal(got, []string{"api-0", "web-0", "web-1"}) {
		t.Fatalf("c1 holds %v, want every service's computes", got)
	}
	if n := f.fake.syncs["c1"]; n != 2 {
		t.Errorf("c1 synced %d times in two passes", n)
	}
	r := &Root{store: f.st, nudgeServices: make(chan struct{}, 1)}
	if _, err := r.deleteService(context.Background(), "api"); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if got := f.fake.heldNames("c1"); !slices.Equal(got, []string{"web-0", "web-1"}) {
		t.Fatalf("after deleting api, c1 holds %v", got)
	}
}

// TestControllerAllocatesAddresses: replicas of a service on a network get
// one address each from root's IPAM before they are placed, never a second
// one, the flavor's price, a Blocked NoAddress when the network is full,
// and their addresses back (in quarantine) when they are deleted.
func TestControllerAllocatesAddresses(t *testing.T) {
	f := newControllerFixture(t, "c1")
	ctx := context.Background()
	f.put(kinds.Wrap(&unyov1.Network{Name: "net", Spec: &unyov1.NetworkSpec{Cidr: "10.1.0.0/24", Gateway: "10.1.0.1", Scope: "region", Region: "tokyo",
		Ranges: []*unyov1.AddressRange{{First: "10.1.0.10", Last: "10.1.0.11"}}}}),
		kinds.Wrap(&unyov1.Flavor{Name: "small", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 2, Memory: "4Gi", Disk: "10Gi",
			PricePerHour: 0.5, ModelPrices: map[string]float64{"m2": 0.75}}}))
	s := webService(3)
	s.Spec.Compute.Network = "net"
	f.apply(s)
	f.pass()
	f.pass() // a second pass allocates nothing more
	if got, want := f.computes(), "web-0 c1 Active; web-1 c1 Active; web-2  Blocked NoAddress"; got != want {
		t.Fatalf("computes = %s, want %s", got, want)
	}
	allocs, err := f.st.ListAllocations(ctx, "net", f.clock)
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 2 {
		t.Fatalf("allocations = %v, want 2", allocs)
	}
	held := map[string]string{}
	for _, a := range allocs {
		held[a.GetHolder()] = a.GetAddress()
	}
	for _, name := range []string{"web-0", "web-1"} {
		o, _ := f.st.GetObject(ctx, service.KindCompute, name)
		c := o.GetCompute()
		if c.GetAddress() == "" || held["compute/"+name] != c.GetAddress() {
			t.Errorf("%s has address %q; IPAM holds %v", name, c.GetAddress(), held)
		}
		if c.GetPrice().GetPerHour() != 0.5 || c.GetPrice().GetModelPrices()["m2"] != 0.75 {
			t.Errorf("%s price = %v, want the flavor's", name, c.GetPrice())
		}
	}
	f.fake.mu.Lock()
	for _, c := range f.fake.held["c1"] {
		if c.GetAddress() != held["compute/"+c.GetName()] {
			t.Errorf("c1 got %s with address %q", c.GetName(), c.GetAddress())
		}
	}
	f.fake.mu.Unlock()
	o, _ := f.st.GetObject(ctx, service.KindCompute, "web-2")
	if msg := o.GetCompute().GetStatus().GetMessage(); !strings.Contains(msg, "no address for it in network net") {
		t.Errorf("web-2's message = %q", msg)
	}

	r := &Root{store: f.st, nudgeServices: make(chan struct{}, 1)}
	if _, err := r.deleteService(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if got := f.computes(); got != "" {
		t.Fatalf("computes left: %s", got)
	}
	allocs, err = f.st.ListAllocations(ctx, "net", f.clock)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		if a.GetReleasedAt() == nil || !a.GetReusableAt().AsTime().Equal(f.clock.Add(DefaultAddressQuarantine)) {
			t.Errorf("after the delete, %s is %v; want released with the quarantine", a.GetAddress(), a)
		}
	}
	if len(allocs) != 2 {
		t.Errorf("allocations after the delete = %v, want the two in quarantine", allocs)
	}
}
