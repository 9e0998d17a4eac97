package schedule

import (
	"slices"
	"testing"
)

// TestSnapshotReuse places over one Snapshot while the caller updates the
// nodes in place, as a scheduler keeping one per pass does.
func TestSnapshotReuse(t *testing.T) {
	nodes := []Node{nd("a", 4, 16, "rack", "r1"), nd("b", 4, 16, "rack", "r2"), nd("c", 4, 16, "rack", "r3")}
	snap := NewSnapshot(nodes)
	req := Request{Shape: shape(4, 4), Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}}}

	res := snap.Place(req, 1)
	if got := names(res.Placed); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first placement on %v", got)
	}
	nodes[0].Reserved = nodes[0].Reserved.Add(req.Shape) // committed
	nodes[1].Cordoned = true                             // cordoned meanwhile
	other := Request{Shape: shape(1, 1), Policy: Policy{NoDefaultSpread: true}}
	if got := names(snap.Place(other, 1).Placed); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("another service went to %v, want c (a is full, b cordoned)", got)
	}

	// A placement known only by labels, on a node outside the snapshot,
	// names a rack no node has; it still counts and does not disturb the
	// racks the nodes have.
	req.Existing = []Placement{{Node: "a"}, {Node: "gone", Labels: map[string]string{lk("rack"): "r9"}}}
	res = snap.Place(req, 2)
	if got := names(res.Placed); !slices.Equal(got, []string{"c"}) || res.Reason == nil {
		t.Fatalf("placed %v (reason %v), want [c] then a reason", got, res.Reason)
	}
	const want = "0/3 nodes fit: 2 anti-affinity on rack (blocking domains r1, r3), 1 cordoned"
	if res.Reason.String() != want {
		t.Errorf("reason\n got %q\nwant %q", res.Reason, want)
	}
}

func TestCodeNames(t *testing.T) {
	seen := map[string]bool{}
	for c := pass; c <= CodeInsufficient; c++ {
		if seen[c.String()] {
			t.Errorf("code %d repeats the name %q", c, c.String())
		}
		seen[c.String()] = true
	}
}
