package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// Billing and compute addresses (issue 14, item 10, and IPAM for
// computes), checked inside TestRegionServiceEndToEnd: each replica holds
// an address of its service's network, shown by `computes ls` and handed to
// its process as UNYO_ADDRESS, released after the delete; the billing
// report at root matches the reservations' times, as the test saw them
// begin and end, at the flavor's price for each node's machine model.

// reservedSpan bounds one reservation's length: it began between began[0]
// and began[1] and ended between ended[0] and ended[1] (the test's
// observations on either side).
type reservedSpan struct{ began, ended [2]time.Time }

func (s reservedSpan) min() float64 { return s.ended[0].Sub(s.began[1]).Seconds() }
func (s reservedSpan) max() float64 { return s.ended[1].Sub(s.began[0]).Seconds() }

// checkAddresses wants every replica to hold a distinct address of prefix,
// in `computes ls` and in its process's environment; it returns them by
// replica.
func checkAddresses(t *testing.T, rootURL string, prefix netip.Prefix) map[string]string {
	t.Helper()
	items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	seen := map[string]bool{}
	for _, it := range items {
		name := fmt.Sprint(it["name"])
		st, _ := it["status"].(map[string]any)
		addr := fmt.Sprint(st["address"])
		a, err := netip.ParseAddr(addr)
		if err != nil || !prefix.Contains(a) || seen[addr] || fmt.Sprint(it["address"]) != addr {
			t.Errorf("%s has address %q (record %v), want a distinct one of %s", name, addr, it["address"], prefix)
		}
		seen[addr], out[name] = true, addr
	}
	env := map[string]bool{}
	for _, pid := range serviceProcs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, "UNYO_ADDRESS="); ok {
				env[v] = true
			}
		}
	}
	for name, addr := range out {
		if !env[addr] {
			t.Errorf("no replica process has UNYO_ADDRESS=%s (%s); the processes have %v", addr, name, env)
		}
	}
	return out
}

// checkReleased wants every address of addrs released (in quarantine) in
// network.
func checkReleased(t *testing.T, rootURL, network string, addrs map[string]string) {
	t.Helper()
	items, err := cliJSON(t, rootURL, "--token", adminToken, "networks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	released := map[string]bool{}
	for _, it := range items {
		if it["name"] != network {
			continue
		}
		usage, _ := it["usage"].(map[string]any)
		allocs, _ := usage["allocations"].([]any)
		for _, a := range allocs {
			m, _ := a.(map[string]any)
			if m["released_at"] != nil {
				released[fmt.Sprint(m["address"])] = true
			}
		}
	}
	for name, addr := range addrs {
		if !released[addr] {
			t.Errorf("%s's address %s is not released in %s: %v", name, addr, network, items)
		}
	}
}

// billingLine is one line of `unyo billing report -o json`.
type billingLine struct {
	Key             string  `json:"key"`
	ReservedSeconds float64 `json:"reserved_seconds"`
	Reservations    int     `json:"reservations"`
	Cost            float64 `json:"cost"`
}

func billingReport(t *testing.T, rootURL string, args ...string) (lines []billingLine, total float64) {
	t.Helper()
	out, err := cli(t, rootURL, append([]string{"--token", adminToken, "billing", "report", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Lines []billingLine `json:"lines"`
		Total float64       `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return r.Lines, r.Total
}

// checkBilling wants root's report by service to hold spans' time (within
// what the test saw) and, by node, each node's time at its price per hour.
func checkBilling(t *testing.T, rootURL, svc string, spans map[string]reservedSpan, price map[string]float64, since time.Time) {
	t.Helper()
	var lo, hi float64
	for _, s := range spans {
		lo, hi = lo+s.min(), hi+s.max()
	}
	window := []string{"--since", since.UTC().Format(time.RFC3339), "--until", "0s"}
	lines, total := billingReport(t, rootURL, append(window, "--by", "service")...)
	if len(lines) != 1 || lines[0].Key != svc || lines[0].Reservations != len(spans) {
		t.Fatalf("billing by service = %+v, want one line for %s with %d reservations", lines, svc, len(spans))
	}
	if s := lines[0].ReservedSeconds; s < lo || s > hi {
		t.Errorf("%s reserved %.3f s, want between %.3f and %.3f (as the test saw the replicas placed and removed)", svc, s, lo, hi)
	}
	byNode, _ := billingReport(t, rootURL, append(window, "--by", "node")...)
	var sum float64
	for _, l := range byNode {
		p, ok := price[l.Key]
		if !ok {
			t.Errorf("billing by node has %s, which held no replica: %+v", l.Key, byNode)
			continue
		}
		if want := p * l.ReservedSeconds / 3600; math.Abs(l.Cost-want) > 0.0051 {
			t.Errorf("node %s: cost %v for %.3f s, want %.2f (%.0f per hour)", l.Key, l.Cost, l.ReservedSeconds, want, p)
		}
		sum += l.ReservedSeconds
	}
	if math.Abs(sum-lines[0].ReservedSeconds) > 1e-6 || math.Abs(total-lines[0].Cost) > 1e-9 {
		t.Errorf("by node: %.3f s in all, by service %.3f s; total %v, line %v", sum, lines[0].ReservedSeconds, total, lines[0].Cost)
	}
}
