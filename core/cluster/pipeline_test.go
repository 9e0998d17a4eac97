package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/configs"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/eventrules/apihook"
)

// env is one cluster on SQLite with a registered node, for pipeline tests.
type env struct {
	t  *testing.T
	c  *client.Clients
	at time.Time // event time of the last report
}

func newEnv(t *testing.T, nodes ...string) *env {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The test receivers listen on 127.0.0.1, which api_hooks reach only
	// when the allowlist says so.
	hooks, err := apihook.ParsePolicy([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: startCluster(t, st, cluster.Options{HookPolicy: hooks})}
	for _, n := range nodes {
		node := &unyov1.Node{Name: n, Labels: map[string]string{"team": "ops"}}
		if _, err := e.c.Agent.Register(context.Background(), connect.NewRequest(&unyov1.RegisterRequest{Node: node})); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) apply(yaml string) {
	e.t.Helper()
	objs, err := manifest.Decode(strings.NewReader(yaml), "test.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.c.Objects.Apply(context.Background(), connect.NewRequest(&unyov1.ApplyRequest{Objects: objs})); err != nil {
		e.t.Fatal(err)
	}
}

// report sends one result and returns its id; occurrences and reissue as the
// agent would copy them from the check.
func (e *env) report(node, check string, level unyov1.Level, output string, occurrences int32, reissue time.Duration) string {
	e.t.Helper()
	// Event time is now (maintenance and rules are judged in event time),
	// strictly increasing so results keep their order.
	e.at = e.at.Add(time.Millisecond)
	if now := time.Now(); now.After(e.at) {
		e.at = now
	}
	id := uuid.NewString()
	ev := &unyov1.Event{Id: id, Node: node, Check: check, Level: level, Output: output, StartedAt: timestamppb.New(e.at),
		Occurrences: occurrences, Reissue: durationpb.New(reissue)}
	if _, err := e.c.Agent.ReportResults(context.Background(), connect.NewRequest(&unyov1.ReportResultsRequest{Node: node, Results: []*unyov1.Event{ev}})); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// explained waits until the pipeline processed the event and returns it.
func (e *env) explained(id string) *unyov1.Event {
	e.t.Helper()
	var ev *unyov1.Event
	testutil.Eventually(e.t, 15*time.Second, "event "+id+" to be processed", func() error {
		resp, err := e.c.Events.GetEvent(context.Background(), connect.NewRequest(&unyov1.GetEventRequest{Id: id}))
		if err != nil {
			return err
		}
		ev = resp.Msg.GetEvents()[0]
		if ev.GetExplanation() == nil {
			return fmt.Errorf("not processed yet")
		}
		return nil
	})
	return ev
}

func (e *env) alerts(states ...unyov1.AlertState) []*unyov1.Alert {
	e.t.Helper()
	resp, err := e.c.Alerts.ListAlerts(context.Background(), connect.NewRequest(&unyov1.ListAlertsRequest{States: states}))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Msg.GetAlerts()
}

func steps(ev *unyov1.Event) string {
	var b strings.Builder
	for _, s := range ev.GetExplanation().GetSteps() {
		fmt.Fprintf(&b, "[%s %s: %s] ", s.GetStage(), s.GetRule(), s.GetOutcome())
	}
	return b.String()
}

const defaultRules = `
kind: EventRule
name: critical-alerts
spec: {type: action, priority: 10, match: {levels: [critical]}, actions: [{create_alert: {}}], owner: t, reason: t}
---
kind: EventRule
name: resolve
spec: {type: action, priority: 10, match: {levels: [success]}, actions: [{delete_alert: {}}], owner: t, reason: t}
`

const (
	ok   = unyov1.Level_LEVEL_SUCCESS
	warn = unyov1.Level_LEVEL_WARNING
	crit = unyov1.Level_LEVEL_CRITICAL
)

func TestAlertLifecycleThroughThePipeline(t *testing.T) {
	e := newEnv(t, "web1")
	e.apply(defaultRules)
	id := e.report("web1", "disk", crit, "DISK CRITICAL", 1, 0)
	ev := e.explained(id)
	if !strings.Contains(steps(ev), "opened alert") {
		t.Fatalf("explanation: %s", steps(ev))
	}
	as := e.alerts()
	if len(as) != 1 || as[0].GetState() != unyov1.AlertState_ALERT_STATE_OPEN || as[0].GetKey() != "web1/disk" {
		t.Fatalf("alerts: %v", as)
	}
	// A repeat refreshes the same alert.
	e.explained(e.report("web1", "disk", crit, "DISK CRITICAL", 1, 0))
	if as = e.alerts(); len(as) != 1 || as[0].GetCount() != 2 {
		t.Fatalf("after a repeat: %v", as)
	}
	// Recovery resolves it; an operator still has to close it.
	e.explained(e.report("web1", "disk", ok, "DISK OK", 1, 0))
	if as = e.alerts(); len(as) != 1 || as[0].GetState() != unyov1.AlertState_ALERT_STATE_RESOLVED {
		t.Fatalf("after recovery: %v", as)
	}
	// Firing again reopens it, visibly.
	e.explained(e.report("web1", "disk", crit, "DISK CRITICAL again", 1, 0))
	as = e.alerts()
	if len(as) != 1 || as[0].GetState() != unyov1.AlertState_ALERT_STATE_OPEN {
		t.Fatalf("after firing again: %v", as)
	}
	last := as[0].GetHistory()[len(as[0].GetHistory())-1]
	if last.GetFrom() != unyov1.AlertState_ALERT_STATE_RESOLVED || last.GetTo() != unyov1.AlertState_ALERT_STATE_OPEN {
		t.Fatalf("reopening not recorded: %v", as[0].GetHistory())
	}
	// Closing needs a reason.
	_, err := e.c.Alerts.CloseAlert(context.Background(), connect.NewRequest(&unyov1.AlertActionRequest{Id: as[0].GetId(), By: "alice"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition && connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("close without a reason: %v", err)
	}
	if _, err := e.c.Alerts.AckAlert(context.Background(), connect.NewRequest(&unyov1.AlertActionRequest{Id: as[0].GetId(), By: "alice"})); err != nil {
		t.Fatal(err)
	}
	resp, err := e.c.Alerts.CloseAlert(context.Background(), connect.NewRequest(&unyov1.AlertActionRequest{Id: as[0].GetId(), By: "alice", Reason: "disk replaced"}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetAlert().GetState() != unyov1.AlertState_ALERT_STATE_CLOSED {
		t.Fatalf("close: %v", resp.Msg.GetAlert())
	}
	if as = e.alerts(); len(as) != 0 {
		t.Fatalf("closed alerts listed by default: %v", as)
	}
	// A closed alert never reopens: the next firing opens a new one.
	e.explained(e.report("web1", "disk", crit, "DISK CRITICAL", 1, 0))
	if as = e.alerts(); len(as) != 1 || as[0].GetId() == resp.Msg.GetAlert().GetId() {
		t.Fatalf("after firing on a closed alert: %v", as)
	}
}

func TestOccurrencesReissueSilenceMaintenanceFilter(t *testing.T) {
	e := newEnv(t, "web1", "db1")
	e.apply(defaultRules + `
---
kind: EventRule
name: quiet-test
spec: {type: silence, priority: 50, match: {check: "test-.*"}, owner: t, reason: experiments}
---
kind: EventRule
name: drop-noise
spec: {type: filter, match: {check: noise}, owner: t, reason: noise}
`)
	// Occurrences: two criticals are pending, the third raises.
	for i := 1; i <= 2; i++ {
		ev := e.explained(e.report("web1", "load", crit, "LOAD CRITICAL", 3, 0))
		if ev.GetExplanation().GetOutcome() != "pending" {
			t.Fatalf("result %d of 3: %s %s", i, ev.GetExplanation().GetOutcome(), steps(ev))
		}
	}
	if as := e.alerts(); len(as) != 0 {
		t.Fatalf("alert before 3 occurrences: %v", as)
	}
	if ev := e.explained(e.report("web1", "load", crit, "LOAD CRITICAL", 3, 0)); ev.GetExplanation().GetOutcome() != "processed" {
		t.Fatalf("third result: %s", steps(ev))
	}
	if as := e.alerts(); len(as) != 1 {
		t.Fatalf("alerts after 3 occurrences: %v", as)
	}

	// Reissue: the same level within the window is suppressed; a level
	// change always goes through.
	e.explained(e.report("db1", "mem", warn, "MEM WARNING", 1, time.Hour))
	if ev := e.explained(e.report("db1", "mem", warn, "MEM WARNING", 1, time.Hour)); ev.GetExplanation().GetOutcome() != "suppressed" {
		t.Fatalf("repeat within reissue window: %s", steps(ev))
	}
	if ev := e.explained(e.report("db1", "mem", crit, "MEM CRITICAL", 1, time.Hour)); ev.GetExplanation().GetOutcome() != "processed" {
		t.Fatalf("level change within reissue window: %s", steps(ev))
	}

	// Silence rules: stored, marked, no action.
	ev := e.explained(e.report("web1", "test-x", crit, "boom", 1, 0))
	if ev.GetSilencedBy() != "rule:quiet-test" || ev.GetExplanation().GetOutcome() != "silenced" {
		t.Fatalf("silence: %s %s", ev.GetSilencedBy(), steps(ev))
	}

	// Maintenance silences exactly its scope and says so.
	e.apply(`
kind: Maintenance
name: swap-disks
spec: {nodes: [web1], checks: ["disk.*"], reason: replacing disks, owner: bob}
`)
	in := e.explained(e.report("web1", "disk-sda", crit, "DISK CRITICAL", 1, 0))
	if in.GetSilencedBy() != "maintenance:swap-disks" {
		t.Fatalf("in scope: %s %s", in.GetSilencedBy(), steps(in))
	}
	for _, out := range []*unyov1.Event{
		e.explained(e.report("db1", "disk-sda", crit, "DISK CRITICAL", 1, 0)),
		e.explained(e.report("web1", "cpu", crit, "CPU CRITICAL", 1, 0)),
	} {
		if out.GetSilencedBy() != "" || !strings.Contains(steps(out), "opened alert") {
			t.Fatalf("out of scope %s/%s: %s %s", out.GetNode(), out.GetCheck(), out.GetSilencedBy(), steps(out))
		}
	}
	if _, err := e.c.Maintenance.EndMaintenance(context.Background(), connect.NewRequest(&unyov1.EndMaintenanceRequest{Name: "swap-disks", By: "bob"})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "the ended maintenance to stop silencing", func() error {
		ev := e.explained(e.report("web1", "disk-sdb", crit, "DISK CRITICAL", 1, 0))
		if ev.GetSilencedBy() != "" {
			return fmt.Errorf("still silenced by %s", ev.GetSilencedBy())
		}
		return nil
	})

	// Filter rules drop before storing, and count the drop.
	id := e.report("web1", "noise", crit, "noise", 1, 0)
	if _, err := e.c.Events.GetEvent(context.Background(), connect.NewRequest(&unyov1.GetEventRequest{Id: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("filtered event was stored: %v", err)
	}
	r, err := e.c.Objects.Get(context.Background(), connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "EventRule", Name: "drop-noise"}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Msg.GetObjects()[0].GetEventRule().GetMatched(); n != 1 {
		t.Fatalf("filter rule matched %d, want 1", n)
	}
}

// receiver records webhook deliveries.
type receiver struct {
	mu    sync.Mutex
	got   []map[string]any
	keys  []string
	srv   *httptest.Server
	fails int // answer 503 this many times first
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fails > 0 {
			r.fails--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body is not JSON: %v: %s", err, body)
		}
		r.got = append(r.got, m)
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() ([]map[string]any, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.got...), append([]string(nil), r.keys...)
}

func TestHooksAndAggregation(t *testing.T) {
	e := newEnv(t, "web1", "web2", "web3")
	plain, am := newReceiver(t), newReceiver(t)
	am.fails = 2 // retried with backoff, then delivered
	e.apply(fmt.Sprintf(`
kind: EventRule
name: hook-critical
spec:
  type: action
  priority: 10
  match: {levels: [critical], check: "http"}
  actions:
    - create_alert: {level: fatal}
    - api_hook: {url: %q}
  continue: true
  owner: t
  reason: t
---
kind: EventRule
name: hook-am
spec:
  type: action
  priority: 5
  match: {levels: [critical], check: "http"}
  actions: [{api_hook: {url: %q, format: alertmanager}}]
  owner: t
  reason: t
---
kind: EventRule
name: group-disks
spec:
  type: aggregate
  match: {check: disk}
  group_by: [check]
  wait: 1s
  actions: [{api_hook: {url: %q}}]
  owner: t
  reason: t
`, plain.srv.URL, am.srv.URL, plain.srv.URL))

	id := e.report("web1", "http", crit, "HTTP CRITICAL - 500", 1, 0)
	ev := e.explained(id)
	if !strings.Contains(steps(ev), "hook-critical") || !strings.Contains(steps(ev), "hook-am") {
		t.Fatalf("continue-next: both rules should act: %s", steps(ev))
	}
	testutil.Eventually(t, 15*time.Second, "both webhooks", func() error {
		p, _ := plain.deliveries()
		a, _ := am.deliveries()
		if len(p) != 1 || len(a) != 1 {
			return fmt.Errorf("plain %d, alertmanager %d", len(p), len(a))
		}
		return nil
	})
	p, keys := plain.deliveries()
	if p[0]["version"] != "unyo.v1" || p[0]["rule"] != "hook-critical" || keys[0] == "" {
		t.Errorf("unyo payload: %v (key %q)", p[0], keys[0])
	}
	if alert, _ := p[0]["alert"].(map[string]any); alert == nil || alert["level"] != "ALERT_LEVEL_FATAL" {
		t.Errorf("unyo payload carries the alert the rule opened: %v", p[0]["alert"])
	}
	a, _ := am.deliveries()
	amAlerts, _ := a[0]["alerts"].([]any)
	if a[0]["version"] != "4" || a[0]["status"] != "firing" || len(amAlerts) != 1 {
		t.Fatalf("alertmanager payload: %v", a[0])
	}
	labels := amAlerts[0].(map[string]any)["labels"].(map[string]any)
	if labels["alertname"] != "http" || labels["node"] != "web1" {
		t.Errorf("alertmanager labels: %v", labels)
	}
	testutil.Eventually(t, 15*time.Second, "the delivery outcome in the explanation", func() error {
		if s := steps(e.explained(id)); strings.Count(s, "delivered after") != 2 {
			return fmt.Errorf("%s", s)
		}
		return nil
	})

	// Aggregation: three nodes' disk events within the window act once,
	// naming every member.
	var ids []string
	for _, n := range []string{"web1", "web2", "web3"} {
		ids = append(ids, e.report(n, "disk", crit, "DISK CRITICAL on "+n, 1, 0))
	}
	testutil.Eventually(t, 15*time.Second, "the group's one delivery", func() error {
		if p, _ := plain.deliveries(); len(p) != 2 {
			return fmt.Errorf("%d deliveries", len(p))
		}
		return nil
	})
	p, _ = plain.deliveries()
	members, _ := p[1]["events"].([]any)
	if len(members) != 3 {
		t.Fatalf("group delivery names %d events, want 3: %v", len(members), p[1])
	}
	for _, id := range ids {
		if s := steps(e.explained(id)); !strings.Contains(s, "actions ran once for 3 events") {
			t.Errorf("member %s explanation: %s", id, s)
		}
	}
}

func TestHookFinalFailureIsAnEvent(t *testing.T) {
	e := newEnv(t, "web1")
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(dead.Close)
	e.apply(fmt.Sprintf(`
kind: EventRule
name: hook
spec: {type: action, match: {check: http}, actions: [{api_hook: {url: %q, retries: 1, timeout: 1s}}], owner: t, reason: t}
---
kind: EventRule
name: alert-on-hook-failure
spec: {type: action, match: {check: api-hook}, actions: [{create_alert: {level: warning}}], owner: t, reason: a receiver that keeps failing needs a person}
`, dead.URL+"/hook?token=hook-secret"))
	id := e.report("web1", "http", crit, "HTTP CRITICAL", 1, 0)
	testutil.Eventually(t, 15*time.Second, "the failure recorded in the explanation", func() error {
		if s := steps(e.explained(id)); !strings.Contains(s, "failed after 2 attempts") {
			return fmt.Errorf("%s", s)
		} else if strings.Contains(s, "hook-secret") {
			t.Fatalf("the URL's query leaked into the explanation: %s", s)
		}
		return nil
	})
	// The failure is an event of its own, which rules can alert on.
	testutil.Eventually(t, 15*time.Second, "an alert about the failing hook", func() error {
		for _, a := range e.alerts() {
			if a.GetCheck() == "api-hook" && a.GetNode() == "web1" && strings.Contains(a.GetSummary(), "500") {
				if strings.Contains(a.GetSummary(), "hook-secret") {
					t.Fatalf("the URL's query leaked into the alert: %s", a.GetSummary())
				}
				return nil
			}
		}
		return fmt.Errorf("alerts: %v", e.alerts())
	})
}

// A notification that cannot be delivered is a critical event, so the
// default rules alone open an alert about it: nobody was told of the
// original one.
func TestFailedNotificationAlertsWithDefaultRules(t *testing.T) {
	e := newEnv(t, "web1")
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(dead.Close)
	e.apply(string(configs.DefaultRules))
	e.apply(fmt.Sprintf(`
kind: EventRule
name: page
spec: {type: action, priority: 20, continue: true, match: {check: http}, actions: [{api_hook: {url: %q, retries: 0, timeout: 1s}}], owner: t, reason: t}
`, dead.URL))
	e.report("web1", "http", crit, "HTTP CRITICAL", 1, 0)
	testutil.Eventually(t, 15*time.Second, "a critical alert about the failed notification, from the default rules", func() error {
		for _, a := range e.alerts() {
			if a.GetCheck() == "api-hook" && a.GetNode() == "web1" {
				if a.GetLevel() != unyov1.AlertLevel_ALERT_LEVEL_CRITICAL || a.GetRule() != "critical-alerts" {
					t.Fatalf("alert about the failed notification: level %s by rule %q, want critical by critical-alerts", a.GetLevel().Name(), a.GetRule())
				}
				return nil
			}
		}
		return fmt.Errorf("alerts: %v", e.alerts())
	})
}

// TestDeletedCheckForgottenByRunningPipeline: deleting a check clears what
// the running pipeline kept of it in memory too, not only the stored
// state, so a check created again under that name starts afresh.
func TestDeletedCheckForgottenByRunningPipeline(t *testing.T) {
	e := newEnv(t, "web1")
	const check = "kind: Check\nname: load\nspec: {command: [check_dummy, \"2\"], interval: 1m}\n"
	e.apply(defaultRules + "---\n" + check)
	for i := 1; i <= 2; i++ {
		if ev := e.explained(e.report("web1", "load", crit, "LOAD CRITICAL", 3, 0)); ev.GetExplanation().GetOutcome() != "pending" {
			t.Fatalf("result %d of 3: %s", i, steps(ev))
		}
	}
	if _, err := e.c.Objects.Delete(context.Background(), connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: "Check", Name: "load"}}})); err != nil {
		t.Fatal(err)
	}
	e.apply(check)
	// Two results were counted before the delete; a pipeline that still
	// held them would take this one for the third and open an alert.
	if ev := e.explained(e.report("web1", "load", crit, "LOAD CRITICAL", 3, 0)); ev.GetExplanation().GetOutcome() != "pending" {
		t.Fatalf("first result after the check was created again: %s", steps(ev))
	}
	if as := e.alerts(unyov1.AlertState_ALERT_STATE_OPEN); len(as) != 0 {
		t.Fatalf("alert from occurrences counted before the check was deleted: %v", as)
	}
}
