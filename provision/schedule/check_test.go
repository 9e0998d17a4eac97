package schedule

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	rack := func(r string) map[string]string { return map[string]string{lk("rack"): r} }
	n := nd("a", 8, 16, "rack", "r1")
	anti := Policy{AntiAffinity: []Term{{Key: lk("rack")}}}
	tests := []struct {
		name string
		node Node
		req  Request
		want string // "" when the commit may go ahead
	}{
		{"fits", n, Request{Shape: shape(8, 16)}, ""},
		{"another writer reserved in between", with(n, func(n *Node) { n.Reserved = shape(1, 0) }), Request{Shape: shape(8, 16)},
			"0/1 nodes fit: 1 insufficient vCPU (need 8 vCPUs; best node has 7 vCPUs free)"},
		{"cordoned since", with(n, func(n *Node) { n.Cordoned = true }), Request{Shape: shape(1, 1)}, "0/1 nodes fit: 1 cordoned"},
		{"anti-affinity against a replica committed elsewhere", n,
			Request{Shape: shape(1, 1), Policy: anti, Existing: []Placement{{Node: "b", Labels: rack("r1")}}},
			"0/1 nodes fit: 1 anti-affinity on rack (blocking domain r1)"},
		{"anti-affinity with other racks only", n,
			Request{Shape: shape(1, 1), Policy: anti, Existing: []Placement{{Node: "b", Labels: rack("r2")}}}, ""},
		{"affinity bound elsewhere", n,
			Request{Shape: shape(1, 1), Policy: Policy{Affinity: []Term{{Key: lk("rack")}}}, Existing: []Placement{{Node: "b", Labels: rack("r2")}}},
			"0/1 nodes fit: 1 affinity on rack (bound to r2)"},
		{"missing label", nd("x", 8, 16), Request{Shape: shape(1, 1), Policy: anti}, "0/1 nodes fit: 1 missing label topology.unyo.dev/rack"},
		{"spread is not re-checked", n,
			Request{Shape: shape(1, 1), Policy: Policy{Spread: []Spread{{Key: lk("rack"), MaxSkew: 1}}}, Existing: []Placement{{Node: "a", Labels: rack("r1")}}}, ""},
		{"zero-size", n, Request{}, "invalid request: zero-size replica (vCPUs, memory and disk are all 0)"},
		{"shapeless (a load balancer)", n, Request{Shapeless: true}, ""},
		{"shapeless on a full node", with(n, func(n *Node) { n.Reserved = n.Capacity }), Request{Shapeless: true}, ""},
		{"shapeless with a shape", n, Request{Shapeless: true, Shape: shape(1, 1)}, "invalid request: a shapeless request with shape {VCPUs:1 MemoryBytes:1073741824 DiskBytes:1073741824}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.node, tt.req)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("Check = %v, want %q", err, tt.want)
			case err != nil:
				var r *Reason
				if !errors.As(err, &r) {
					t.Errorf("Check error %T is not a *Reason", err)
				}
			}
		})
	}
}
