package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// services is the fixture's RegionService "web": web-0 Active on n1,
// web-1 Blocked with the scheduler's per-reason counts.
func services(now time.Time) []*unyov1.Object {
	at := timestamppb.New(now.Add(-time.Minute))
	return []*unyov1.Object{
		kinds.Wrap(&unyov1.Flavor{Name: "small", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 1, Memory: "256Mi", Disk: "1Gi"}}),
		kinds.Wrap(&unyov1.RegionService{Name: "web", Revision: 2, UpdatedAt: at,
			Spec: &unyov1.RegionServiceSpec{Region: "region-1", Compute: &unyov1.ComputeSpec{Flavor: "small", Image: "sleeper", Provider: "exec", Replicas: 2,
				Schedule: &unyov1.SchedulePolicy{AntiAffinity: []*unyov1.AffinityTerm{{Key: "topology.unyo.dev/rack"}}}}},
			Status: &unyov1.RegionServiceStatus{Phase: "Blocked", Reason: "NoCapacity", Message: "1 of 2 replicas cannot be placed", Replicas: 2, Active: 1, UpdatedAt: at}}),
		kinds.Wrap(&unyov1.Compute{Name: "web-0", Service: "web", Index: 0, Cluster: "c1",
			Resources: &unyov1.ComputeResources{Vcpus: 1, MemoryBytes: 256 << 20},
			Status:    &unyov1.ComputeStatus{Phase: "Active", Node: "n1", Address: "10.200.0.10", ScheduledAt: at, ActiveAt: at}}),
		kinds.Wrap(&unyov1.Compute{Name: "web-1", Service: "web", Index: 1, Cluster: "c1",
			Status: &unyov1.ComputeStatus{Phase: "Blocked", Reason: "NoCapacity", Message: "0/1 nodes fit: 1 anti-affinity",
				Reasons: []*unyov1.ScheduleReasonCount{{Code: "anti_affinity", Count: 1, Detail: "topology.unyo.dev/rack=rack-1-1 holds 1"}}}}),
		kinds.Wrap(&unyov1.Loadbalancer{Name: "web-lb", Service: "web", Vip: "10.200.0.5", Cluster: "c1",
			Spec:     &unyov1.LoadbalancerSpec{Provider: "xdp", Ports: []*unyov1.LoadbalancerPort{{Port: 80, TargetPort: 8080, Protocol: "tcp"}}},
			Backends: []*unyov1.LoadbalancerBackend{{Compute: "web-0", Address: "10.200.0.10"}},
			Status: &unyov1.LoadbalancerStatus{Phase: "Active", Node: "n2", Packets: 1234, Bytes: 56789,
				Backends: []*unyov1.LoadbalancerBackendStatus{{Compute: "web-0", Address: "10.200.0.10", Healthy: true, Packets: 1234, Bytes: 56789}}}}),
	}
}

// Issue 18 item 6: the services list and one service's page, with every
// replica, where it is and why not, and the plan.
func TestServicesPages(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	want := map[string][]string{
		"/services": {`href="/service?name=web"`, "region-1", `class="badge ph-Blocked"`, "1 / 2", "NoCapacity"},
		"/service?name=web": {
			"<h1>Service web</h1>", "small", "sleeper", "anti-affinity on topology.unyo.dev/rack",
			`id="c-web-0"`, `class="badge ph-Active"`, `href="/node?name=n1&amp;cluster=c1"`, "10.200.0.10",
			`id="c-web-1"`, "0/1 nodes fit: 1 anti-affinity", "anti_affinity: 1 (topology.unyo.dev/rack=rack-1-1 holds 1)",
			`data-refresh=`, `action="/service/scale"`, `name="replicas"`, "Plan: where", "web-1",
			// Issue 16 item 4: its load balancer, with its backends' health and traffic.
			"Load balancer web-lb", `id="lb-vip">10.200.0.5`, "80/tcp to 8080", `href="/node?name=n2&amp;cluster=c1"`,
			"<td>web-0</td><td>10.200.0.10</td><td>yes</td><td>-</td><td>1234</td><td>56789</td>"},
	}
	for p, ws := range want {
		resp, body := b.get(p)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
		for _, w := range ws {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", p, w)
			}
		}
	}
	if resp, _ := b.get("/service?name=nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown service: %d, want 404", resp.StatusCode)
	}
}

// Scaling from the page applies the service with the new count, as the
// operator; a viewer has no form and is refused by the API.
func TestScaleFromTheServicePage(t *testing.T) {
	e := newEnv(t, fixture(t))
	v := e.browser()
	v.login(viewerTok)
	if _, body := v.get("/service?name=web"); strings.Contains(body, `action="/service/scale"`) {
		t.Errorf("a viewer sees the scale form")
	}
	resp, _ := v.do("POST", "/service/scale", map[string][]string{"csrf": {v.csrf}, "name": {"web"}, "replicas": {"5"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("viewer's scale: %d", resp.StatusCode)
	}
	if _, body := v.get("/service?name=web"); !strings.Contains(body, `role="alert"`) || !strings.Contains(body, "Not scaled") {
		t.Errorf("the viewer's refusal is not shown as a problem")
	}
	if len(e.api.actedBy) > 0 {
		t.Fatalf("a viewer scaled: %v", e.api.actedBy)
	}

	b := e.browser()
	b.login(adminTok)
	resp, _ = b.do("POST", "/service/scale", map[string][]string{"csrf": {b.csrf}, "name": {"web"}, "replicas": {"x"}}, nil)
	if _, body := b.get("/service?name=web"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(body, "not a replica count") || len(e.api.actedBy) > 0 {
		t.Errorf("a bad count was not refused before the API: %d %v", resp.StatusCode, e.api.actedBy)
	}
	b.do("POST", "/service/scale", map[string][]string{"csrf": {b.csrf}, "name": {"web"}, "replicas": {"5"}}, nil)
	_, body := b.get("/service?name=web")
	if !strings.Contains(body, "Service web scaled to 5 replica(s) by admin") {
		t.Errorf("no flash after scaling")
	}
	last := e.api.objects[len(e.api.objects)-1].GetRegionService()
	if last.GetSpec().GetCompute().GetReplicas() != 5 || last.GetStatus() != nil || last.GetSpec().GetCompute().GetFlavor() != "small" {
		t.Errorf("applied %v, want the service with 5 replicas and no status", last)
	}
	if len(e.api.actedBy) != 1 || !strings.HasPrefix(e.api.actedBy[0], "admin") {
		t.Errorf("recorded as %v, want admin", e.api.actedBy)
	}
}

// Item 4's buttons: cordon and uncordon as the operator; drain shows the
// server's answer (Unimplemented until drain is built); the node's
// scheduling state, reservations and computes are on its page.
func TestNodeButtons(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	_, body := b.get("/node?name=n1&cluster=c1")
	for _, w := range []string{`id="sched">schedulable`, "2 of 8 CPUs (25%)", "4.0 GiB of 16.0 GiB memory (25%)",
		`action="/node/cordon"`, `id="cordon"`, `data-confirm="Cordon node n1`, `action="/node/drain"`, `name="deadline"`, `name="force"`,
		`href="/service?name=web#c-web-0"`, "10.200.0.10"} {
		if !strings.Contains(body, w) {
			t.Errorf("the node page lacks %q", w)
		}
	}
	if strings.Contains(body, "web-1") {
		t.Errorf("the node page lists a compute placed nowhere")
	}
	resp, _ := b.do("POST", "/node/cordon", map[string][]string{"csrf": {b.csrf}, "name": {"n1"}, "cluster": {"c1"}, "cordoned": {"1"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/node?cluster=c1&name=n1" {
		t.Fatalf("cordon: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = b.get("/node?name=n1&cluster=c1")
	if !strings.Contains(body, "Node n1 cordoned by admin") || !strings.Contains(body, `class="badge sched-cordoned"`) || !strings.Contains(body, `id="uncordon"`) {
		t.Errorf("the node page does not show the node cordoned")
	}
	if _, list := b.get("/nodes"); !strings.Contains(list, `class="badge sched-cordoned"`) {
		t.Errorf("the nodes list does not show the node cordoned")
	}
	b.do("POST", "/node/cordon", map[string][]string{"csrf": {b.csrf}, "name": {"n1"}, "cluster": {"c1"}, "cordoned": {"0"}}, nil)
	if e.api.nodes[0].GetCordoned() || len(e.api.actedBy) != 2 || !strings.HasPrefix(e.api.actedBy[1], "admin") {
		t.Errorf("uncordon: cordoned=%v, acted by %v", e.api.nodes[0].GetCordoned(), e.api.actedBy)
	}

	// Drain: the cluster's refusal is shown in the page's alert box.
	b.do("POST", "/node/drain", map[string][]string{"csrf": {b.csrf}, "name": {"n1"}, "cluster": {"c1"}, "deadline": {"30m"}, "force": {"1"}}, nil)
	_, body = b.get("/node?name=n1&cluster=c1")
	problems := between(body, `<div class="problems" role="alert">`, `</div>`)
	if !strings.Contains(problems, "Node n1 not draining: draining nodes is not built yet in cluster c1") {
		t.Errorf("the drain's error is not shown: %q", problems)
	}
	b.do("POST", "/node/drain", map[string][]string{"csrf": {b.csrf}, "name": {"n1"}, "cluster": {"c1"}, "deadline": {"soon"}}, nil)
	if _, body = b.get("/node?name=n1&cluster=c1"); !strings.Contains(body, `Deadline: &#34;soon&#34; is not a duration`) {
		t.Errorf("a bad deadline is not refused")
	}

	// A viewer has no buttons, and the API refuses the post.
	v := e.browser()
	v.login(viewerTok)
	if _, body := v.get("/node?name=n1&cluster=c1"); strings.Contains(body, `action="/node/cordon"`) || strings.Contains(body, `action="/node/drain"`) {
		t.Errorf("a viewer sees the node buttons")
	}
	v.do("POST", "/node/cordon", map[string][]string{"csrf": {v.csrf}, "name": {"n1"}, "cluster": {"c1"}, "cordoned": {"1"}}, nil)
	if e.api.nodes[0].GetCordoned() {
		t.Errorf("a viewer cordoned the node")
	}
}

// Item 3 of the brief: the rack view lists each server's computes, in the
// drawing (the box's title) and under it, linked to their services.
func TestRackViewListsComputes(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	for _, p := range []string{"/racks?cluster=c1", "/racks?floor=floor-1-1-1"} {
		_, body := b.get(p)
		svg := between(body, "<svg", "</svg>")
		// The box says how many it runs; its title names them.
		if !strings.Contains(svg, "on it:&#xA;  web-0 (Compute)") || !strings.Contains(svg, ">rack-1-1-server1 +1</text>") {
			t.Errorf("%s: the server's box does not show its compute", p)
		}
		table := between(body, `<table id="rack-computes">`, `</table>`)
		if !strings.Contains(table, "rack-1-1-server1") || !strings.Contains(table, `1: <a href="/service?name=web#c-web-0"`) || strings.Contains(table, "web-1") {
			t.Errorf("%s: the computes table is %q", p, table)
		}
	}
}

// The page's script redraws the replicas with X-Unyo-Refresh: that
// request skips the plan and leaves the flash for the next page.
func TestServicePageRefresh(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	b.do("POST", "/service/scale", map[string][]string{"csrf": {b.csrf}, "name": {"web"}, "replicas": {"3"}}, nil)
	resp, body := b.do("GET", "/service?name=web", nil, map[string]string{"X-Unyo-Refresh": "1"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="c-web-0"`) || strings.Contains(body, `<th scope="col">Replica</th><th scope="col">Cluster</th>`) || strings.Contains(body, "scaled to 3") {
		t.Errorf("a refresh: %d, replicas %v, plan or flash in it", resp.StatusCode, strings.Contains(body, `id="c-web-0"`))
	}
	if _, body := b.get("/service?name=web"); !strings.Contains(body, "scaled to 3") || !strings.Contains(body, `<th scope="col">Replica</th><th scope="col">Cluster</th>`) {
		t.Errorf("the next page lost the flash or the plan")
	}
}
