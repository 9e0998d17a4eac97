package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// Placement runs below keep nodes Ready without agents: no heartbeat is
// missed for an hour.
var fleetOptions = cluster.Options{StaleAfter: time.Hour, DownAfter: 2 * time.Hour}

// joinFleet registers n nodes through the agent API as agents would (no
// agent runs): cpus vCPUs and 1 TiB each, racks of 10 nodes over 3 zones
// (agent labels rack and zone). It returns once all are Ready.
func joinFleet(tb testing.TB, c *client.Clients, n int, cpus int32) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		node := &unyov1.Node{Name: fmt.Sprintf("n%04d", i),
			Capacity: &unyov1.Capacity{Cpus: cpus, MemoryBytes: 1 << 40, DiskBytes: 1 << 42},
			Labels:   map[string]string{"rack": fmt.Sprintf("r%03d", i/10), "zone": fmt.Sprintf("z%d", i/10%3)}}
		if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: node})); err != nil {
			tb.Fatal(err)
		}
	}
	testutil.Eventually(tb, 60*time.Second, fmt.Sprintf("%d nodes Ready", n), func() error {
		for i := range n {
			if _, err := c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: fmt.Sprintf("n%04d", i)})); err != nil {
				return err
			}
		}
		resp, err := c.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{}))
		if err != nil {
			return err
		}
		ready := 0
		for _, nd := range resp.Msg.GetNodes() {
			if nd.GetState() == unyov1.NodeState_NODE_STATE_READY {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("%d of %d Ready", ready, n)
		}
		return nil
	})
}

// fleetReplica is replica i of service: 1 vCPU and 1 GiB, at most two
// replicas of the service per rack (a hard rule), spread evenly over the
// zones (hard, skew 1).
func fleetReplica(service string, i int) *unyov1.Compute {
	return &unyov1.Compute{
		Name: fmt.Sprintf("%s-%d", service, i), Service: service, Index: int32(i), Cluster: "c1",
		Spec: &unyov1.ComputeSpec{Provider: "exec", Command: []string{"sleep", "600"}, Schedule: &unyov1.SchedulePolicy{
			AntiAffinity: []*unyov1.AffinityTerm{{Key: "rack", MaxPerDomain: maxPerRack}},
			Spread:       []*unyov1.SpreadConstraint{{Key: "zone", MaxSkew: 1}},
		}},
		Resources: &unyov1.ComputeResources{Vcpus: 1, MemoryBytes: 1 << 30},
	}
}

const maxPerRack = 2

// fleetServices appends services of five replicas named prefix-N, count
// replicas in all, to cs.
func fleetServices(cs []*unyov1.Compute, prefix string, count int) []*unyov1.Compute {
	for i := range count {
		cs = append(cs, fleetReplica(fmt.Sprintf("%s-%d", prefix, i/5), i%5))
	}
	return cs
}

func syncComputes(tb testing.TB, c *client.Clients, cs []*unyov1.Compute) {
	tb.Helper()
	if _, err := c.Provision.SyncComputes(context.Background(), connect.NewRequest(&unyov1.SyncComputesRequest{Computes: cs})); err != nil {
		tb.Fatal(err)
	}
}

// waitSettled waits until no compute is waiting for a node any more
// (each is Scheduled, Blocked or Failed) and returns how many hold a
// reservation.
func waitSettled(tb testing.TB, st store.Store, want int, timeout time.Duration) int {
	tb.Helper()
	var placed int
	testutil.Eventually(tb, timeout, fmt.Sprintf("%d computes settled", want), func() error {
		cs, err := st.ListComputes(context.Background())
		if err != nil {
			return err
		}
		placed = 0
		for _, c := range cs {
			switch c.GetStatus().GetPhase() {
			case "Initializing", "":
				return fmt.Errorf("%s still %q", c.GetName(), c.GetStatus().GetPhase())
			case "Creating:Scheduled":
				placed++
			}
		}
		if len(cs) != want {
			return fmt.Errorf("%d computes, want %d", len(cs), want)
		}
		return nil
	})
	return placed
}

// benchProvision measures replicas placed and durably written per second
// through the API and the store: 200 registered nodes (no agents), and
// each op one SyncComputes of 2,000 more replicas (400 services of five,
// rack anti-affinity and zone spread), timed until every replica holds its
// reservation (ListReservations, every 200 ms). On a machine others share,
// replicas per CPU-second of the process (cluster, store and benchmark)
// says what a core of its own would do.
func benchProvision(b *testing.B, st store.Store) {
	c := startCluster(b, st, fleetOptions)
	joinFleet(b, c, 200, 64)
	const perOp = 2000
	var all []*unyov1.Compute
	var elapsed, cpu time.Duration
	for i := range b.N {
		cpu0 := cpuTime(b)
		all = fleetServices(all, fmt.Sprintf("b%d", i), perOp)
		start := time.Now()
		syncComputes(b, c, all)
		for {
			rs, err := st.ListReservations(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if len(rs) == len(all) {
				break
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("%d of %d replicas placed after 5m", len(rs), len(all))
			}
			time.Sleep(200 * time.Millisecond)
		}
		elapsed += time.Since(start)
		cpu += cpuTime(b) - cpu0
	}
	b.StopTimer()
	if placed := waitSettled(b, st, len(all), time.Minute); placed != len(all) {
		b.Fatalf("%d of %d Creating:Scheduled", placed, len(all))
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "replicas/s")
	b.ReportMetric(float64(len(all))/cpu.Seconds(), "replicas/cpu-s")
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkProvisionSQLite(b *testing.B) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchProvision(b, st)
}

// The PostgreSQL server keeps fsync on: commits are durable.
func BenchmarkProvisionPostgresDurable(b *testing.B) {
	st, err := sqlstore.OpenPostgres(context.Background(), testpg.New(b, testpg.WithDurable()).DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchProvision(b, st)
}

// TestNodeStagesRacePostgres: two cluster replicas on one PostgreSQL
// database, each with its own store handle, place computes synced in
// waves through both replicas' APIs; the nodes' capacity is only a little
// more than the replicas need, so late placements compete for the last
// room. With the lease only its holder places; forced, each replica runs
// a node stage besides (three stages racing). Read back from the database
// at the end: no node over capacity, no service with more than
// maxPerRack replicas in a rack, no compute reserved twice, and the
// computes' nodes are their reservations'.
//
// 2,000 placements in each mode, 1,000 with -short; the 10,000
// (about nine minutes on a loaded 2-core machine) with
// UNYO_RACE_PLACEMENTS=10000.
func TestNodeStagesRacePostgres(t *testing.T) {
	total := 2000
	if testing.Short() {
		total = 1000
	}
	if v := os.Getenv("UNYO_RACE_PLACEMENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("UNYO_RACE_PLACEMENTS=%q: %v", v, err)
		}
		total = n
	}
	srv := testpg.New(t)
	for _, forced := range []bool{false, true} {
		name := "lease"
		if forced {
			name = "forced"
		}
		t.Run(name, func(t *testing.T) {
			dsn := srv.CreateDatabase(t)
			var stores [2]store.Store
			var clients [2]*client.Clients
			var replicas [2]*cluster.Cluster
			for i := range stores {
				st, err := sqlstore.OpenPostgres(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				o := fleetOptions
				o.Replica, o.LeaseTTL = fmt.Sprintf("r%d", i+1), 2*time.Second
				cl, url := serveCluster(t, st, o, server.Options{})
				c, err := client.New(client.Options{URL: url, Timeout: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				stores[i], clients[i], replicas[i] = st, c, cl
			}
			// 10% more vCPUs than the replicas take, 10 per rack.
			nodes := 100
			cpus := int32(total*11/10/nodes) + 1
			joinFleet(t, clients[0], nodes, cpus)
			if forced {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for _, r := range replicas {
					wg.Add(1)
					go func() { defer wg.Done(); cluster.RunNodeStage(r, ctx) }()
				}
				t.Cleanup(func() { cancel(); wg.Wait() })
			}
			// Waves of 500 through alternate replicas, without waiting for
			// the previous wave.
			var all []*unyov1.Compute
			start := time.Now()
			for w := 0; len(all) < total; w++ {
				all = fleetServices(all, fmt.Sprintf("w%d", w), min(500, total-len(all)))
				syncComputes(t, clients[w%2], all)
				time.Sleep(100 * time.Millisecond)
			}
			placed := waitSettled(t, stores[1], total, 10*time.Minute)
			t.Logf("%s: %d of %d replicas placed in %s on %d nodes of %d vCPUs", name, placed, total, time.Since(start).Round(time.Millisecond), nodes, cpus)
			if placed < total*9/10 {
				t.Errorf("only %d of %d placed", placed, total)
			}
			checkPlacements(t, stores[0], all)
		})
	}
}

// checkPlacements checks from the database that no node is over capacity,
// no service has more than maxPerRack replicas in a rack, no compute holds
// two reservations and each placed compute's node is its reservation's.
func checkPlacements(t *testing.T, st store.Store, all []*unyov1.Compute) {
	t.Helper()
	ctx := context.Background()
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := st.ListReservations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := st.ListComputes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rack := map[string]string{}
	capacity := map[string]int64{}
	for _, n := range nodes {
		rack[n.GetName()] = n.GetLabels()["rack"]
		capacity[n.GetName()] = int64(n.GetCapacity().GetCpus())
	}
	used := map[string]int64{}
	perRack := map[[2]string]int{}
	held := map[string]string{}
	for _, r := range rs {
		if n, ok := held[r.Compute]; ok {
			t.Errorf("compute %s reserved twice: on %s and %s", r.Compute, n, r.Node)
		}
		held[r.Compute] = r.Node
		used[r.Node] += r.Resources.VCPUs
		perRack[[2]string{r.Service, rack[r.Node]}]++
	}
	for n, u := range used {
		if u > capacity[n] {
			t.Errorf("node %s overcommitted: %d of %d vCPUs reserved", n, u, capacity[n])
		}
	}
	for k, v := range perRack {
		if v > maxPerRack {
			t.Errorf("service %s has %d replicas in rack %s (max %d)", k[0], v, k[1], maxPerRack)
		}
	}
	scheduled := 0
	for _, c := range cs {
		if c.GetStatus().GetPhase() != "Creating:Scheduled" {
			continue
		}
		scheduled++
		if n := held[c.GetName()]; n != c.GetStatus().GetNode() {
			t.Errorf("compute %s is on %q, its reservation on %q", c.GetName(), c.GetStatus().GetNode(), n)
		}
	}
	if scheduled != len(rs) {
		t.Errorf("%d computes Scheduled, %d reservations", scheduled, len(rs))
	}
	if len(cs) != len(all) {
		t.Errorf("%d computes stored, %d synced", len(cs), len(all))
	}
}
