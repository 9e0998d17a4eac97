package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/amtest"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// The side-by-side workload: senders post batches back to back for sendFor,
// each item one of checks checks on the sender's node, at the level
// levelOf gives.
const (
	senders = 8
	sendFor = 6 * time.Second
	checks  = 40
)

// levelOf is the level of the k-th item a sender posts: 7 of 10 OK, 2
// warning, 1 critical, as in the pipeline benchmarks of core/cluster. As
// checks is a multiple of 10, each check always has the same level.
func levelOf(k int) unyov1.Level {
	switch k % 10 {
	case 7, 8:
		return unyov1.Level_LEVEL_WARNING
	case 9:
		return unyov1.Level_LEVEL_CRITICAL
	default:
		return unyov1.Level_LEVEL_SUCCESS
	}
}

// runFigures is what one server did with the workload.
type runFigures struct {
	accepted int64         // items the server acknowledged
	sending  time.Duration // first request to the last answer
	// endToEnd is first request to the last item processed, for unyo;
	// Alertmanager processes an alert as it accepts it.
	endToEnd time.Duration
	cpu      float64 // CPU seconds of the server process over the run
	storeCPU float64 // CPU seconds of its PostgreSQL server, if any
}

// benchStore is where the unyo cluster keeps its state: SQLite in its data
// directory, or a database of pg, whose commits are durable.
type benchStore struct {
	name string
	pg   *testpg.Server
}

// BenchmarkAlertmanagerSideBySide sends the same workload — 8 senders
// posting batches of 100, and of 500, back to back for 6 s — to Debian's
// Prometheus Alertmanager (POST /api/v2/alerts; an OK result is a resolved
// alert) and to a unyo cluster process with 100 event rules (ReportResults
// with node credentials; SQLite, and PostgreSQL with durable commits). It
// reports, side by side, what each accepted per second and per CPU second
// of its process (for PostgreSQL also of the cluster process and the
// database server together), unyo's rate end to end (until the pipeline
// has processed the last result) and how long its backlog took to clear
// after the last result was accepted, and cpu-ratio: unyo's CPU per result
// (with the database server's) ÷ Alertmanager's CPU per alert. b.N is not
// used: one run is the fixed workload.
//
// With UNYO_BENCH_BASELINE naming another unyo binary (an older build), each
// store is measured with that binary too, as "<store>/baseline" right
// before the binary under test, beside the same Alertmanager run: a
// before/after comparison in one invocation.
func BenchmarkAlertmanagerSideBySide(b *testing.B) {
	pg := testpg.New(b, testpg.WithDurable())
	bins := []struct{ name, path string }{{"", unyoBin}}
	if base := os.Getenv("UNYO_BENCH_BASELINE"); base != "" {
		bins = append([]struct{ name, path string }{{"/baseline", base}}, bins...)
	}
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			am := alertmanagerRun(b, batch)
			for _, st := range []benchStore{
				{name: "sqlite"},
				{name: "postgres-durable", pg: pg},
			} {
				for _, bin := range bins {
					b.Run(st.name+bin.name, func(b *testing.B) {
						u := unyoRun(b, bin.path, batch, st)
						b.ReportMetric(am.perSecond(), "am-alerts/s")
						b.ReportMetric(am.perCPUSecond(), "am-alerts/cpu-s")
						b.ReportMetric(u.perSecond(), "unyo-accepted/s")
						b.ReportMetric(float64(u.accepted)/u.endToEnd.Seconds(), "unyo-processed/s")
						b.ReportMetric(float64(u.accepted)/u.cpu, "unyo-results/cpu-s")
						b.ReportMetric((u.endToEnd - u.sending).Seconds(), "unyo-backlog-clear-s")
						if st.pg != nil {
							b.ReportMetric(u.perCPUSecond(), "unyo+postgres-results/cpu-s")
						}
						b.ReportMetric(am.perCPUSecond()/u.perCPUSecond(), "cpu-ratio")
					})
				}
			}
		})
	}
}

// wantFiring is how many alerts the workload leaves firing: one per node
// and check that is not OK.
func wantFiring() int {
	n := 0
	for c := range checks {
		if levelOf(c) != unyov1.Level_LEVEL_SUCCESS {
			n++
		}
	}
	return senders * n
}

func (f runFigures) perSecond() float64    { return float64(f.accepted) / f.sending.Seconds() }
func (f runFigures) perCPUSecond() float64 { return float64(f.accepted) / (f.cpu + f.storeCPU) }

// alertmanagerRun starts an Alertmanager and sends it the workload as
// alerts: alertname the check, instance the node; warning and critical
// fire, OK resolves.
func alertmanagerRun(b *testing.B, batch int) runFigures {
	am := amtest.Start(b)
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	cpu0 := cpuSeconds(b, am.PID())
	f := sendLoad(b, batch, func(ctx context.Context, sender, first int) (int, error) {
		now := time.Now()
		alerts := make([]amtest.Alert, batch)
		for j := range alerts {
			k := first + j
			a := amtest.Alert{
				Labels:      map[string]string{"alertname": fmt.Sprintf("check-%d", k%checks), "instance": fmt.Sprintf("node-%d", sender)},
				Annotations: map[string]string{"summary": "result"},
				StartsAt:    now,
			}
			if levelOf(k) == unyov1.Level_LEVEL_SUCCESS {
				a.EndsAt = now
			}
			alerts[j] = a
		}
		if err := am.Post(ctx, httpc, alerts); err != nil {
			return 0, err
		}
		return len(alerts), nil
	})
	f.cpu = settledCPU(b, am.PID()) - cpu0
	alerts, err := am.Alerts(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	firing := 0
	for _, a := range alerts {
		if a.EndsAt.After(time.Now()) {
			firing++
		}
	}
	if firing != wantFiring() {
		b.Fatalf("Alertmanager has %d alerts firing, want %d", firing, wantFiring())
	}
	return f
}

// unyoRun starts a cluster process on st with the 100 rules, enrols the
// senders' nodes with the join token, and sends the workload as results,
// each sender with its node's own credential, as agents do. Then it sends
// one more result and waits until the pipeline has explained it: the
// pipeline takes results in the order they were stored, so every result
// before it has been processed by then.
func unyoRun(b *testing.B, bin string, batch int, st benchStore) runFigures {
	ctx := context.Background()
	env := []string{
		"UNYO_SERVER_ADMIN_TOKENS=" + adminToken, "UNYO_SERVER_JOIN_TOKENS=" + joinToken,
		// Alerts only, as Alertmanager: no metric or log store.
		"UNYO_METRICS_STORE=none", "UNYO_LOGS_STORE=none",
	}
	storeCPU := func() float64 { return 0 }
	if st.pg != nil {
		env = append(env, "UNYO_STORE_DRIVER=postgres", "UNYO_STORE_DSN="+st.pg.CreateDatabase(b))
		pid, ok := st.pg.PID()
		if !ok {
			b.Fatal("PostgreSQL is not running")
		}
		storeCPU = func() float64 { return treeCPUSeconds(b, pid) }
	}
	p, url := startClusterProcessBin(b, bin, env...)
	admin, err := client.New(client.Options{URL: url, Token: adminToken, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	objs, err := manifest.Decode(strings.NewReader(testutil.HundredRules()), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: objs})); err != nil {
		b.Fatalf("apply the 100 rules: %v", err)
	}
	nodes := make([]*client.Clients, senders)
	for i := range nodes {
		if nodes[i], err = enrol(ctx, url, &unyov1.Node{Name: fmt.Sprintf("node-%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	report := func(ctx context.Context, sender int, results []*unyov1.Event) (int, error) {
		resp, err := nodes[sender].Agent.ReportResults(ctx, connect.NewRequest(&unyov1.ReportResultsRequest{Node: fmt.Sprintf("node-%d", sender), Results: results}))
		if err != nil {
			return 0, err
		}
		if n := int(resp.Msg.GetAccepted()); n != len(results) {
			return n, fmt.Errorf("the cluster accepted %d of %d results: %v", n, len(results), resp.Msg.GetRejected())
		}
		return len(results), nil
	}
	cpu0, storeCPU0 := cpuSeconds(b, p.pid()), storeCPU()
	start := time.Now()
	f := sendLoad(b, batch, func(ctx context.Context, sender, first int) (int, error) {
		node := fmt.Sprintf("node-%d", sender)
		results := make([]*unyov1.Event, batch)
		for j := range results {
			k := first + j
			results[j] = &unyov1.Event{Id: uuid.Must(uuid.NewV7()).String(), Node: node, Check: fmt.Sprintf("check-%d", k%checks),
				Level: levelOf(k), Output: "result", StartedAt: timestamppb.Now()}
		}
		return report(ctx, sender, results)
	})
	last := &unyov1.Event{Id: uuid.Must(uuid.NewV7()).String(), Node: "node-0", Check: "bench-last",
		Level: unyov1.Level_LEVEL_SUCCESS, Output: "the last result", StartedAt: timestamppb.Now()}
	if _, err := report(ctx, 0, []*unyov1.Event{last}); err != nil {
		b.Fatal(err)
	}
	var processed time.Time
	testutil.Eventually(b, 5*time.Minute, "the pipeline to process the last result", func() error {
		resp, err := admin.Events.GetEvent(ctx, connect.NewRequest(&unyov1.GetEventRequest{Id: last.GetId()}))
		if err != nil {
			return err
		}
		at := resp.Msg.GetEvents()[0].GetExplanation().GetProcessedAt()
		if at == nil {
			return fmt.Errorf("not processed yet")
		}
		processed = at.AsTime()
		return nil
	})
	f.endToEnd = processed.Sub(start)
	f.cpu = settledCPU(b, p.pid()) - cpu0
	f.storeCPU = storeCPU() - storeCPU0
	resp, err := admin.Alerts.ListAlerts(ctx, connect.NewRequest(&unyov1.ListAlertsRequest{Limit: 1000}))
	if err != nil {
		b.Fatal(err)
	}
	if n := len(resp.Msg.GetAlerts()); n != wantFiring() {
		b.Fatalf("the cluster has %d alerts open, want %d", n, wantFiring())
	}
	return f
}

// sendLoad runs the senders: each calls post back to back with the index
// of its next item until sendFor has passed, and stops the benchmark at the
// first error. post returns how many items the server acknowledged.
func sendLoad(b *testing.B, batch int, post func(ctx context.Context, sender, first int) (int, error)) runFigures {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var accepted atomic.Int64
	var errs sync.Map
	var wg sync.WaitGroup
	start := time.Now()
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := 0; time.Since(start) < sendFor; first += batch {
				n, err := post(ctx, s, first)
				accepted.Add(int64(n))
				if err != nil {
					errs.Store(s, err)
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	sending := time.Since(start)
	errs.Range(func(s, err any) bool {
		b.Errorf("sender %d: %v", s, err)
		return true
	})
	if b.Failed() {
		b.FailNow()
	}
	return runFigures{accepted: accepted.Load(), sending: sending}
}

// settledCPU returns a process's CPU seconds once it has gone quiet (less
// than 2% of a core over 250 ms), so that work a server does after
// answering — Alertmanager's dispatcher, unyo's commits — is counted; at
// most 10 s after it is called.
func settledCPU(b *testing.B, pid int) float64 {
	cpu := cpuSeconds(b, pid)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		time.Sleep(250 * time.Millisecond)
		next := cpuSeconds(b, pid)
		if next-cpu < 0.005 {
			return next
		}
		cpu = next
	}
	return cpu
}
