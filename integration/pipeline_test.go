package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// reporter sends hand-made results for one node straight to the agent API.
type reporter struct {
	t    *testing.T
	node string
	urls []string // cluster replicas; tried in turn
	// token is the join token until the node is enrolled, then its own.
	token string
}

func newReporter(t *testing.T, node string, urls ...string) *reporter {
	r := &reporter{t: t, node: node, urls: urls, token: joinToken}
	testutil.Eventually(t, 30*time.Second, "registering "+node, func() error {
		return r.call(func(c *client.Clients) error {
			resp, err := c.Agent.Register(context.Background(), connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: node}}))
			if err == nil {
				r.token = resp.Msg.GetNodeToken()
			}
			return err
		})
	})
	return r
}

func (r *reporter) call(fn func(*client.Clients) error) error {
	var err error
	for _, u := range r.urls {
		var c *client.Clients
		if c, err = client.New(client.Options{URL: u, Token: r.token, Timeout: 5 * time.Second}); err != nil {
			return err
		}
		if err = fn(c); err == nil {
			return nil
		}
	}
	return err
}

// send reports events until one replica acknowledges them, and returns their ids.
func (r *reporter) send(check string, level unyov1.Level, n int, reissue time.Duration) []string {
	r.t.Helper()
	var ids []string
	var evs []*unyov1.Event
	for range n {
		id := uuid.Must(uuid.NewV7()).String()
		ids = append(ids, id)
		evs = append(evs, &unyov1.Event{Id: id, Node: r.node, Check: check, Level: level, Output: check + " is bad",
			StartedAt: timestamppb.Now(), Reissue: durationpb.New(reissue)})
	}
	testutil.Eventually(r.t, 60*time.Second, "results acknowledged", func() error {
		return r.call(func(c *client.Clients) error {
			_, err := c.Agent.ReportResults(context.Background(), connect.NewRequest(&unyov1.ReportResultsRequest{Node: r.node, Results: evs}))
			return err
		})
	})
	return ids
}

// explainedAll waits until every event has an explanation.
func (f *fleet) explainedAll(node, check string, want int) []map[string]any {
	f.t.Helper()
	var h []map[string]any
	testutil.Eventually(f.t, 60*time.Second, fmt.Sprintf("%d processed %s events", want, check), func() error {
		var err error
		if h, err = f.json("events", "ls", "--history", "--node", node, "--check", check, "--limit", "10000"); err != nil {
			return err
		}
		done := 0
		for _, e := range h {
			if e["explanation"] != nil {
				done++
			}
		}
		if done != want || len(h) != want {
			return fmt.Errorf("%d stored, %d processed", len(h), done)
		}
		return nil
	})
	return h
}

func TestPipelineFailoverAndRestarts(t *testing.T) {
	f := newFleet(t, sharedStores)
	hooks := newHookReceiver(t)
	rules := fmt.Sprintf(`
kind: EventRule
name: count
spec:
  type: action
  match: {check: "flood|reissue"}
  actions: [{create_alert: {}}, {api_hook: {url: %q, repeat_interval: 0s}}] # every event, not per change
  owner: t
  reason: every processed event counts once
---
kind: EventRule
name: group
spec:
  type: aggregate
  match: {check: agg}
  group_by: [check]
  wait: 6s
  actions: [{api_hook: {url: %q}}]
  owner: t
  reason: one delivery per group
`, hooks.srv.URL, hooks.srv.URL)
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "rules.yaml", rules)); err != nil {
		t.Fatal(err)
	}
	second, secondURL := startReplica(t, f, "replica-2", "", sharedStores)
	r := newReporter(t, "gen", f.clURL, secondURL)

	// 1. Two replicas; the lease holder is killed while events flow.
	urls := map[string]string{"first": f.clURL, "second": secondURL}
	var holder []string
	testutil.Eventually(t, 20*time.Second, "a lease holder", func() error {
		var err error
		if holder, err = leaseHolders(t, urls); err != nil || len(holder) != 1 {
			return fmt.Errorf("holders %v %v", holder, err)
		}
		return nil
	})
	// Root knows the first replica's address only (replicas usually share
	// one behind a load balancer), so read from the survivor directly.
	victim, survivor, survivorURL := f.cluster, second, secondURL
	if holder[0] == "second" {
		victim, survivor, survivorURL = second, f.cluster, f.clURL
	}
	var ids []string
	for i := 0; i < 40; i++ {
		ids = append(ids, r.send("flood", unyov1.Level_LEVEL_CRITICAL, 25, 0)...)
		if i == 15 {
			victim.kill()
			f.api = survivorURL
		}
	}
	f.explainedAll("gen", "flood", len(ids))
	as := f.alertsWhere("gen", "flood")
	if len(as) != 1 || str(as[0], "count") != fmt.Sprint(len(ids)) {
		t.Errorf("alert for %d processed events: %v", len(ids), as)
	}
	testutil.Eventually(t, 60*time.Second, "a delivery for every event", func() error {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		missing := 0
		for _, id := range ids {
			if hooks.keys["count/"+id+"/1"] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d events have no delivery", missing, len(ids))
		}
		return nil
	})
	hooks.mu.Lock()
	dup := 0
	for _, n := range hooks.keys {
		dup += n - 1
	}
	hooks.mu.Unlock()
	t.Logf("failover: %d events processed once each; %d deliveries repeated (at least once)", len(ids), dup)

	// Only the survivor is left.
	f.cluster, f.clURL = survivor, survivorURL
	r.urls = []string{f.clURL}

	// 2. Killed in the middle of an aggregation window: after the restart
	// the group's actions run once, with every member.
	before := hooks.count()
	aggIDs := r.send("agg", unyov1.Level_LEVEL_CRITICAL, 3, 0)
	f.explainedAll("gen", "agg", 3)
	f.cluster.kill()
	f.cluster.restart()
	testutil.Eventually(t, 60*time.Second, "the group's delivery", func() error {
		if n := hooks.count() - before; n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	got := hooks.all()[before]
	if members, _ := got["events"].([]any); len(members) != 3 {
		t.Errorf("group delivery has %d members, want 3: %v", len(members), got)
	}
	for _, id := range aggIDs {
		out, err := f.cli("events", "get", id)
		if err != nil || !strings.Contains(out, "actions ran once for 3 events") {
			t.Errorf("member %s: %v\n%s", id, err, out)
		}
	}

	// 3. Killed inside a reissue window: the window survives the restart.
	r.send("reissue", unyov1.Level_LEVEL_CRITICAL, 1, time.Hour)
	f.explainedAll("gen", "reissue", 1)
	f.cluster.kill()
	f.cluster.restart()
	r.send("reissue", unyov1.Level_LEVEL_CRITICAL, 1, time.Hour)
	h := f.explainedAll("gen", "reissue", 2)
	outcomes := []string{str(h[1]["explanation"].(map[string]any), "outcome"), str(h[0]["explanation"].(map[string]any), "outcome")}
	if strings.Join(outcomes, ",") != "processed,suppressed" {
		t.Errorf("reissue across a restart: %v, want processed then suppressed", outcomes)
	}
	// The suppressed repeat notifies nobody but still refreshes the alert.
	if as := f.alertsWhere("gen", "reissue"); len(as) != 1 || str(as[0], "count") != "2" {
		t.Errorf("reissue alert: %v, want count 2", as)
	}
}

// startReplica starts another replica of cluster c1 on the fleet's
// database, with clusterExtra as more lines under `cluster:` and extra as
// top-level YAML (its stores).
func startReplica(t *testing.T, f *fleet, name, clusterExtra, extra string) (*proc, string) {
	addr := freeAddr(t)
	cfg := writeFile(t, f.dir, name+".yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/%s
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
store:
  driver: postgres
  dsn: %s
  history_per_check: 100000
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
  replica: %s
  heartbeat_interval: 1s
  stale_after: 5s
  lease_ttl: 3s
  api_hook: {allow: [127.0.0.1/32]} # the tests' hook receivers
%s%s`, f.dir, name, addr, adminToken, joinToken, f.pg.DSN(), name, clusterExtra, extra))
	return startUnyo(t, name, nil, "server", "--config", cfg), "http://" + addr
}
