package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// fakeProvider is a provider whose resources are counted "processes". Its
// Create looks for an existing resource and starts one in two steps with
// a pause between, unlocked, as a real provider without a per-id lock
// would: two Creates of one id in flight together start two processes,
// which the test then sees.
type fakeProvider struct {
	pluginv1.UnimplementedProviderServer
	delay time.Duration

	mu       sync.Mutex
	live     map[string]int // processes running per id
	peak     map[string]int // most processes ever running at once per id
	started  map[string]int // processes ever started per id
	labels   map[string]map[string]string
	creates  int            // Create calls
	gets     int            // Get calls (loadbalancers_test.go)
	recovers map[string]int // Recover calls per id
}

func newFakeProvider(delay time.Duration) *fakeProvider {
	return &fakeProvider{delay: delay, live: map[string]int{}, peak: map[string]int{}, started: map[string]int{}, labels: map[string]map[string]string{}}
}

func (p *fakeProvider) resource(id string) *pluginv1.Resource {
	return &pluginv1.Resource{Id: id, Labels: p.labels[id], State: pluginv1.ResourceState_RESOURCE_STATE_RUNNING,
		Handle: &pluginv1.Handle{Version: 1, Driver: "fake", State: []byte(id)}}
}

func (p *fakeProvider) Schema(context.Context, *pluginv1.SchemaRequest) (*pluginv1.SchemaResponse, error) {
	return &pluginv1.SchemaResponse{ResourceSchema: `{"properties":{"command":{}}}`}, nil
}

func (p *fakeProvider) Create(_ context.Context, req *pluginv1.CreateRequest) (*pluginv1.CreateResponse, error) {
	id := req.GetId()
	p.mu.Lock()
	p.creates++
	exists := p.live[id] > 0
	p.mu.Unlock()
	if !exists {
		time.Sleep(p.delay)
		p.mu.Lock()
		p.live[id]++
		p.peak[id] = max(p.peak[id], p.live[id])
		p.started[id]++
		p.labels[id] = req.GetLabels()
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pluginv1.CreateResponse{Resource: p.resource(id), Created: !exists}, nil
}

func (p *fakeProvider) Delete(_ context.Context, req *pluginv1.DeleteRequest) (*pluginv1.DeleteResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	existed := p.live[req.GetId()] > 0
	delete(p.live, req.GetId())
	return &pluginv1.DeleteResponse{Existed: existed}, nil
}

func (p *fakeProvider) List(_ context.Context, req *pluginv1.ListRequest) (*pluginv1.ListResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*pluginv1.Resource
	for id, n := range p.live {
		if n > 0 && p.labels[id][LabelNode] == req.GetLabels()[LabelNode] {
			out = append(out, p.resource(id))
		}
	}
	return &pluginv1.ListResponse{Resources: out}, nil
}

func (p *fakeProvider) Recover(_ context.Context, req *pluginv1.RecoverRequest) (*pluginv1.RecoverResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recovers == nil {
		p.recovers = map[string]int{}
	}
	p.recovers[req.GetId()]++
	if p.live[req.GetId()] == 0 {
		return nil, grpcstatus.Error(codes.NotFound, "gone")
	}
	return &pluginv1.RecoverResponse{Resource: p.resource(req.GetId())}, nil
}

// vanish ends a resource's process behind the agent's back.
func (p *fakeProvider) vanish(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, id)
}

type providerCounts struct {
	creates             int
	live, started, peak map[string]int
}

func (p *fakeProvider) counts() providerCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := providerCounts{creates: p.creates, live: maps.Clone(p.live), started: maps.Clone(p.started), peak: maps.Clone(p.peak)}
	return c
}

// fakeAssignments is the cluster's side: the node's assignments under a
// generation that moves on every change, a long poll, and the reports.
type fakeAssignments struct {
	mu       sync.Mutex
	changed  chan struct{}
	gen      int64
	as       map[string]*unyov1.Assignment
	pairs    map[string]bool // every (compute, generation) ever assigned
	states   int             // states reported
	last     map[string]*unyov1.AssignmentState
	getCalls int
	hold     time.Duration // how long a fetch at the current generation waits for a change
}

func newFakeAssignments() *fakeAssignments {
	// The generation starts at 1, as the store's counter does: 0 is the
	// agent's "never fetched", the one value the long poll answers at once.
	return &fakeAssignments{gen: 1, hold: 100 * time.Millisecond, changed: make(chan struct{}), as: map[string]*unyov1.Assignment{},
		pairs: map[string]bool{}, last: map[string]*unyov1.AssignmentState{}}
}

// set changes (or with desired "" drops) one assignment, moving the
// generation as the cluster does.
func (f *fakeAssignments) set(compute, desired string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	if desired == "" {
		delete(f.as, compute)
	} else {
		f.as[compute] = &unyov1.Assignment{Compute: compute, Service: "web", Node: "n1", Provider: "fake",
			Command: []string{"sleep", "1h"}, Desired: desired, Generation: f.gen}
		f.pairs[fmt.Sprintf("%s@%d", compute, f.gen)] = true
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeAssignments) GetAssignments(ctx context.Context, req *connect.Request[unyov1.GetAssignmentsRequest]) (*connect.Response[unyov1.GetAssignmentsResponse], error) {
	f.mu.Lock()
	f.getCalls++
	if since := req.Msg.GetSinceGeneration(); since != 0 && since == f.gen {
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(f.hold):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	resp := &unyov1.GetAssignmentsResponse{Generation: f.gen}
	for _, a := range f.as {
		resp.Assignments = append(resp.Assignments, proto.CloneOf(a))
	}
	return connect.NewResponse(resp), nil
}

func (f *fakeAssignments) ReportAssignments(_ context.Context, req *connect.Request[unyov1.ReportAssignmentsRequest]) (*connect.Response[unyov1.ReportAssignmentsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range req.Msg.GetStates() {
		f.states++
		f.last[st.GetCompute()] = st
	}
	return connect.NewResponse(&unyov1.ReportAssignmentsResponse{}), nil
}

// startRunner runs an assignment runner for node n1 against api and a
// provider served over an in-memory gRPC connection; the returned stop
// waits until it ended.
func startRunner(t *testing.T, api *fakeAssignments, p *fakeProvider, path string) (stop func()) {
	t.Helper()
	return startRunnerWith(t, api, p, path, nil)
}

// startRunnerWith is startRunner with a channel naming restarted
// providers, as the agent's plugin supervisor sends them.
func startRunnerWith(t *testing.T, api *fakeAssignments, p *fakeProvider, path string, restarted chan string) (stop func()) {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	pluginv1.RegisterProviderServer(srv, p)
	go func() { _ = srv.Serve(ln) }()
	cc, err := grpc.NewClient("passthrough:///fake", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	conn := base.NewConn(cc, nil)
	r := &assignmentRunner{
		node: "n1", cluster: func() string { return "c1" }, registered: func() bool { return true },
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), api: api, providers: []string{"fake"}, path: path, restarted: restarted,
		do: func(ctx context.Context, provider string, fn func(context.Context, *base.Conn) error) error {
			if provider != "fake" {
				return fmt.Errorf("no provider %q", provider)
			}
			return fn(ctx, conn)
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx, func(err error) error { return err })
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		cc.Close()
		srv.Stop()
	}
	t.Cleanup(stop)
	return stop
}

// TestAssignmentsConvergeOncePerChange: bursts of assignment changes
// (replicas added one at a time, generations moved, replicas deleted) end
// with exactly one process per assigned compute and none for the deleted;
// the provider is asked to create a compute only for a generation it does
// not run yet (not for every assignment on every change), and only
// changed states are reported. A process that vanished is made again, and
// a restarted agent re-attaches without creating anything.
func TestAssignmentsConvergeOncePerChange(t *testing.T) {
	const n = 40
	api := newFakeAssignments()
	p := newFakeProvider(2 * time.Millisecond)
	path := filepath.Join(t.TempDir(), "assignments.json")
	stop := startRunner(t, api, p, path)

	name := func(i int) string { return fmt.Sprintf("web-%d", i) }
	// Burst 1: replicas one by one, each a change of its own, while the
	// agent is still creating the earlier ones.
	for i := range n {
		api.set(name(i), "running")
		time.Sleep(time.Millisecond)
	}
	// Burst 2: the generation of a quarter moves (same config), a quarter
	// is deleted, and two deleted ones come back.
	for i := 0; i < n/4; i++ {
		api.set(name(i), "running")
	}
	for i := n / 4; i < n/2; i++ {
		api.set(name(i), desiredDeleted)
	}
	converged := func(want map[string]int) func() error {
		return func() error {
			c := p.counts()
			for id, k := range want {
				if c.live[id] != k {
					return fmt.Errorf("%s runs %d processes, want %d", id, c.live[id], k)
				}
			}
			api.mu.Lock()
			defer api.mu.Unlock()
			for id, k := range want {
				st := api.last[id]
				wantState := stateRunning
				if k == 0 {
					wantState = stateDeleted
				}
				if a := api.as[id]; a != nil && (st.GetState() != wantState || st.GetGeneration() != a.GetGeneration()) {
					return fmt.Errorf("%s reported %s at generation %d, want %s at %d", id, st.GetState(), st.GetGeneration(), wantState, a.GetGeneration())
				}
			}
			return nil
		}
	}
	want := map[string]int{}
	for i := range n {
		want[name(i)] = 1
		if i >= n/4 && i < n/2 {
			want[name(i)] = 0
		}
	}
	testutil.Eventually(t, 20*time.Second, "converged after the bursts", converged(want))
	for i := n / 4; i < n/2; i++ {
		api.set(name(i), "")
	}
	api.set(name(n/4), "running")
	api.set(name(n/4+1), "running")
	want[name(n/4)], want[name(n/4+1)] = 1, 1
	testutil.Eventually(t, 20*time.Second, "converged after re-adding", converged(want))

	c := p.counts()
	api.mu.Lock()
	pairs, reported, polls := len(api.pairs), api.states, api.getCalls
	api.mu.Unlock()
	t.Logf("%d polls, %d Create calls and %d states reported for %d (compute, generation) pairs", polls, c.creates, reported, pairs)
	for id, k := range c.live {
		if k > 1 {
			t.Errorf("%s runs %d processes, want 1", id, k)
		}
	}
	for id, k := range c.peak {
		if k > 1 {
			t.Errorf("%s ran %d processes at once, want at most 1", id, k)
		}
	}
	for id, k := range c.started {
		if k != 1 && id != name(n/4) && id != name(n/4+1) {
			t.Errorf("%s was started %d times, want once", id, k)
		}
	}
	// At most one Create per (compute, generation): the old agent made one
	// per assignment per change, n²/2 over the first burst alone.
	if c.creates > pairs {
		t.Errorf("%d Create calls for %d (compute, generation) pairs: unchanged assignments were handed to the provider again", c.creates, pairs)
	}
	// Each pair's state once (the deleted ones twice: running, deleted),
	// plus the first full report.
	if reported > pairs+n {
		t.Errorf("%d states reported for %d (compute, generation) pairs: unchanged states were reported again", reported, pairs)
	}

	// A process that vanished is made again at the next change.
	p.vanish(name(0))
	api.set(name(1), "running")
	want[name(0)] = 1
	testutil.Eventually(t, 20*time.Second, "the vanished process made again", converged(want))
	if k := p.counts().started[name(0)]; k != 2 {
		t.Errorf("%s started %d times, want 2 (once more after it vanished)", name(0), k)
	}

	// A restarted agent recovers its handles and creates nothing.
	stop()
	before := p.counts().creates
	startRunner(t, api, p, path)
	api.set(name(2), "running") // one change: one Create
	testutil.Eventually(t, 20*time.Second, "converged after the agent restarted", converged(want))
	time.Sleep(300 * time.Millisecond) // a few more polls
	if got := p.counts().creates - before; got != 1 {
		t.Errorf("the restarted agent made %d Create calls, want 1 (for the one changed assignment)", got)
	}
	for id, k := range p.counts().live {
		if k != 1 {
			t.Errorf("%s runs %d processes after the restart, want 1", id, k)
		}
	}
}

// TestAssignmentsIdleCluster: a cluster that never assigned anything
// answers generation 1 (the counter's first value), on which the agent's
// next fetch waits the long poll out (it spun, when the counter started at
// 0; then it slept a second instead).
func TestAssignmentsIdleCluster(t *testing.T) {
	api := newFakeAssignments()
	api.hold = time.Second // the server's long poll, shortened
	stop := startRunner(t, api, newFakeProvider(0), "")
	testutil.Eventually(t, 10*time.Second, "the first fetch", func() error {
		api.mu.Lock()
		defer api.mu.Unlock()
		if api.getCalls == 0 {
			return errors.New("no fetch yet")
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond)
	stop()
	api.mu.Lock()
	defer api.mu.Unlock()
	// About 2 in 1.5 s; a spinning agent makes thousands.
	if api.getCalls > 10 {
		t.Errorf("%d fetches in about 1.5 s of an idle cluster, want about one per long poll", api.getCalls)
	}
}

// TestProviderRestartRecovers: when the supervisor starts a provider
// plugin again, the runner hands that provider its resources back
// (Recover) at once, without waiting for the long poll's answer, and makes
// again a resource the restarted provider lost.
func TestProviderRestartRecovers(t *testing.T) {
	api := newFakeAssignments()
	api.hold = time.Hour // only a change or the restart may wake the runner
	p := newFakeProvider(0)
	restarted := make(chan string, 1)
	restarted <- "fake" // the first start's: the runner's own recovery covers it
	api.set("web-0", "running")
	startRunnerWith(t, api, p, filepath.Join(t.TempDir(), "held.json"), restarted)
	testutil.Eventually(t, 5*time.Second, "web-0 running", func() error {
		if c := p.counts(); c.live["web-0"] != 1 {
			return fmt.Errorf("live %d", c.live["web-0"])
		}
		return nil
	})
	recovers := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.recovers["web-0"]
	}
	restarted <- "fake"
	testutil.Eventually(t, 5*time.Second, "web-0 recovered after the provider's restart", func() error {
		if n := recovers(); n == 0 {
			return fmt.Errorf("recovered %d times", n)
		}
		return nil
	})
	// The restarted provider lost it: Recover says NotFound, and it is
	// made again without any change of the assignments.
	p.vanish("web-0")
	restarted <- "fake"
	testutil.Eventually(t, 5*time.Second, "web-0 made again", func() error {
		if c := p.counts(); c.started["web-0"] != 2 || c.live["web-0"] != 1 {
			return fmt.Errorf("started %d, live %d", c.started["web-0"], c.live["web-0"])
		}
		return nil
	})
}
