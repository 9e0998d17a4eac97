package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/testutil/browser"
)

// lbRecord is a line of the test-only provider's record file
// (plugins/internal/lbtest).
type lbRecord struct {
	Op       string   `json:"op"`
	ID       string   `json:"id"`
	VIP      string   `json:"vip"`
	Backends []string `json:"backends"`
	node     string
}

// lbRecords reads what the nodes' lbtest providers did, in order per node.
func lbRecords(t *testing.T, dir string) []lbRecord {
	t.Helper()
	var out []lbRecord
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		f, err := os.Open(filepath.Join(dir, node+"-lbtest.jsonl"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r lbRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s's record %q: %v", node, sc.Text(), err)
			}
			r.node = node
			out = append(out, r)
		}
		f.Close()
	}
	return out
}

func lbService(n int) string {
	return webService(n) + `  loadbalancer:
    provider: lbtest
    ports: [{port: 80, target_port: 8080, protocol: tcp}]
    health: {kind: tcp, interval: 1s}
`
}

// TestLoadbalancerFlow: a RegionService with a loadbalancer, end to end
// with root, a cluster and three agents (issue 16, item 1): its load
// balancer gets a VIP of the service's network, is placed on a node and
// realized there through the provider (the test-only lbtest, which
// records its configs and reports every backend healthy), shows its
// backends with health and traffic, follows scale down and up (the
// provider gets Update, never a second Create), and goes with the service.
func TestLoadbalancerFlow(t *testing.T) {
	dir := t.TempDir()
	var once sync.Once
	var sum string
	extra := func(node, pluginDir string) string {
		once.Do(func() {
			bin := filepath.Join(pluginDir, "unyo-provider-lbtest")
			if out, err := exec.Command("go", "build", "-o", bin, "../plugins/internal/lbtest").CombinedOutput(); err != nil {
				t.Fatalf("build lbtest: %v\n%s", err, out)
			}
			sum = sha256File(t, bin)
		})
		return fmt.Sprintf("      - {kind: provider, name: lbtest, sha256: %s, config: {record: %s/%s-lbtest.jsonl}}\n", sum, dir, node)
	}
	_, rootURL, _ := startServiceFleetPlugins(t, dir, lightCluster, extra)
	a := adminCLI{t, rootURL}
	op, must := a.run, a.must

	// Root refuses a Loadbalancer applied directly, and a bad spec names
	// the field.
	a.wantErr("set spec.loadbalancer of a RegionService", "apply", "-f", writeFile(t, dir, "lb.yaml", "kind: Loadbalancer\nname: x-lb\n"))
	a.wantErr("spec.loadbalancer.ports[0].protocol", "apply", "-f", writeFile(t, dir, "bad.yaml", strings.Replace(lbService(1), "protocol: tcp", "protocol: sctp", 1)))

	must("apply", "-f", writeFile(t, dir, "web.yaml", lbService(3)))
	type lbView struct {
		phase, vip, node string
		backends         []string // root's
		healthy          int
		packets          float64
	}
	view := func() (lbView, error) {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "loadbalancers", "ls")
		if err != nil || len(items) != 1 {
			return lbView{}, fmt.Errorf("load balancers: %v, %v", items, err)
		}
		it := items[0]
		st, _ := it["status"].(map[string]any)
		v := lbView{phase: fmt.Sprint(st["phase"]), vip: fmt.Sprint(it["vip"]), node: fmt.Sprint(st["node"])}
		bs, _ := it["backends"].([]any)
		for _, b := range bs {
			v.backends = append(v.backends, fmt.Sprint(b.(map[string]any)["compute"]))
		}
		sbs, _ := st["backends"].([]any)
		for _, b := range sbs {
			if h, _ := b.(map[string]any)["healthy"].(bool); h {
				v.healthy++
			}
		}
		v.packets, _ = st["packets"].(float64)
		if v.packets == 0 {
			// uint64 renders as a string in protojson.
			fmt.Sscan(fmt.Sprint(st["packets"]), &v.packets)
		}
		return v, nil
	}
	waitLB := func(what string, ok func(v lbView) bool) lbView {
		t.Helper()
		var v lbView
		testutil.Eventually(t, 90*time.Second, what, func() error {
			var err error
			if v, err = view(); err != nil {
				return err
			}
			if !ok(v) {
				return fmt.Errorf("load balancer %+v", v)
			}
			return nil
		})
		return v
	}
	all := []string{"web-0", "web-1", "web-2"}
	v := waitLB("web-lb Active with three healthy backends and traffic", func(v lbView) bool {
		return v.phase == "Active" && slices.Equal(v.backends, all) && v.healthy == 3 && v.packets > 0
	})
	addrs := checkAddresses(t, rootURL, netip.MustParsePrefix("10.200.0.0/24"))
	for name, addr := range addrs {
		if addr == v.vip {
			t.Fatalf("the VIP %s is also %s's address", v.vip, name)
		}
	}
	creates := func() []lbRecord {
		var out []lbRecord
		for _, r := range lbRecords(t, dir) {
			if r.Op == "create" {
				out = append(out, r)
			}
		}
		return out
	}
	if cs := creates(); len(cs) != 1 || cs[0].ID != "web-lb" || cs[0].VIP != v.vip || cs[0].node != v.node || !slices.Equal(cs[0].Backends, all) {
		t.Fatalf("the provider's creates: %+v, want one of web-lb on %s with VIP %s and %v", cs, v.node, v.vip, all)
	}

	// The CLI shows it.
	ls := must("loadbalancers", "ls")
	for _, want := range []string{"web-lb", "web", "Active", v.vip, "80/tcp->8080", "c1", v.node, "3/3"} {
		if !strings.Contains(ls, want) {
			t.Errorf("loadbalancers ls lacks %q:\n%s", want, ls)
		}
	}
	get := must("loadbalancers", "get", "web-lb")
	if !strings.Contains(get, "BACKEND") || strings.Count(get, " yes ") != 3 {
		t.Errorf("loadbalancers get shows no three healthy backends:\n%s", get)
	}
	svc := must("services", "get", "web")
	if !strings.Contains(svc, "VIP "+v.vip) || !strings.Contains(svc, "web-2") {
		t.Errorf("services get web lacks the VIP and the backends:\n%s", svc)
	}

	// The service's page shows the load balancer with its backends'
	// health and traffic (issue 18).
	ctx := browser.New(t)
	browser.Step(t, ctx, "log in", 30*time.Second,
		chromedp.Navigate(rootURL+"/login"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", adminToken, chromedp.ByID),
		chromedp.Submit("#token", chromedp.ByID),
		chromedp.WaitVisible("#live-status", chromedp.ByID))
	var vip, backends string
	healthyRow := func(replica string) string {
		return `//table[@id="lb-backends"]//tr[td[1][normalize-space(.)="` + replica + `"]][td[3][normalize-space(.)="yes"]]`
	}
	browser.Step(t, ctx, "see the load balancer on the service's page", 30*time.Second,
		chromedp.Navigate(rootURL+"/service?name=web"),
		chromedp.WaitVisible("#lb-section", chromedp.ByID),
		chromedp.WaitVisible(healthyRow("web-0"), chromedp.BySearch),
		chromedp.WaitVisible(healthyRow("web-1"), chromedp.BySearch),
		chromedp.WaitVisible(healthyRow("web-2"), chromedp.BySearch),
		chromedp.Text("#lb-vip", &vip, chromedp.ByID),
		chromedp.Text("#lb-backends tbody", &backends, chromedp.ByQuery))
	if strings.TrimSpace(vip) != v.vip {
		t.Errorf("the page's VIP is %q, want %s", vip, v.vip)
	}
	for _, name := range all {
		if !strings.Contains(backends, addrs[name]) {
			t.Errorf("the page's backends lack %s's address %s:\n%s", name, addrs[name], backends)
		}
	}

	// Scale down, then up: the backends follow, updated in place.
	lastUpdate := func() []string {
		var b []string
		for _, r := range lbRecords(t, dir) {
			if r.Op == "update" && r.ID == "web-lb" {
				b = r.Backends
			}
		}
		return b
	}
	must("services", "scale", "web", "2")
	waitLB("web-lb with two backends", func(v lbView) bool { return v.phase == "Active" && slices.Equal(v.backends, all[:2]) })
	testutil.Eventually(t, 30*time.Second, "the provider updated to two backends", func() error {
		if b := lastUpdate(); !slices.Equal(b, all[:2]) {
			return fmt.Errorf("last update: %v", b)
		}
		return nil
	})
	// The new replica takes the lowest index free by then (web-2's
	// removal may still be under way): web-0, web-1 and one more.
	three := func(b []string) bool { return len(b) == 3 && slices.Equal(b[:2], all[:2]) }
	must("services", "scale", "web", "3")
	waitLB("web-lb with three backends again", func(v lbView) bool {
		return v.phase == "Active" && three(v.backends) && v.healthy == 3
	})
	testutil.Eventually(t, 30*time.Second, "the provider updated to three backends", func() error {
		if b := lastUpdate(); !three(b) {
			return fmt.Errorf("last update: %v", b)
		}
		return nil
	})
	if cs := creates(); len(cs) != 1 {
		t.Fatalf("the provider created the load balancer %d times: %+v", len(cs), cs)
	}

	// Deleting the service deletes its load balancer, on its node too.
	must("services", "delete", "web")
	testutil.Eventually(t, 90*time.Second, "web-lb gone", func() error {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "loadbalancers", "ls")
		if err != nil || len(items) != 0 {
			return fmt.Errorf("load balancers: %v, %v", items, err)
		}
		if _, err := op("services", "get", "web"); err == nil {
			return fmt.Errorf("service web is still there")
		}
		return nil
	})
	rs := lbRecords(t, dir)
	if last := rs[len(rs)-1]; last.Op != "delete" || last.ID != "web-lb" || last.node != v.node {
		t.Fatalf("the provider's last operation: %+v, want the delete of web-lb on %s", last, v.node)
	}
}
