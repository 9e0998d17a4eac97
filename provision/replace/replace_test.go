package replace

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)

func TestDrainStep(t *testing.T) {
	deadline := t0.Add(time.Hour)
	fresh := Compute{Name: "a", Node: "n1"}
	blocked := Compute{Name: "b", Node: "n1", RepPhase: Blocked, RepReason: ReasonDrain}
	scheduled := Compute{Name: "c", Node: "n1", Replacing: "n2", RepPhase: Scheduled, RepReason: ReasonDrain}
	active := Compute{Name: "d", Node: "n1", Replacing: "n2", RepPhase: Active, RepReason: ReasonDrain}
	surging := Compute{Name: "e", Node: "n1", Replacing: "n3", RepPhase: Scheduled, RepReason: ReasonSurge}
	deleting := Compute{Name: "f", Node: "n1", Deleting: true}
	all := []Compute{fresh, blocked, scheduled, active, surging, deleting}
	for _, tc := range []struct {
		name string
		now  time.Time
		d    Drain
		on   []Compute
		want string
	}{
		{"empty node is done", t0, Drain{Deadline: deadline}, nil, "outcome 1 place [] evict [] gone [] left 0"},
		{"replaces what has no replacement in flight", t0, Drain{Deadline: deadline, NodeReady: true}, all,
			"outcome 0 place [a b] evict [] gone [] left 6"},
		{"the deadline without force stops", deadline, Drain{Deadline: deadline, NodeReady: true}, all,
			"outcome 2 place [] evict [] gone [] left 6"},
		{"the deadline with force evicts what is not yet retired", deadline, Drain{Deadline: deadline, Force: true, NodeReady: true}, all,
			"outcome 0 place [] evict [a b c e] gone [] left 6"},
		{"a forced deadline on a node that is not Ready takes removals as done", deadline.Add(time.Second), Drain{Deadline: deadline, Force: true}, all,
			"outcome 0 place [] evict [a b c e] gone [a b c d e f] left 6"},
		{"a node that is not Ready lets replaced instances go before the deadline", t0, Drain{Deadline: deadline}, all,
			"outcome 0 place [a b] evict [] gone [d] left 6"},
		{"no deadline never stops", t0.Add(1000 * time.Hour), Drain{NodeReady: true}, []Compute{fresh},
			"outcome 0 place [a] evict [] gone [] left 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DrainStep(tc.now, tc.d, tc.on)
			got := fmt.Sprintf("outcome %d place %v evict %v gone %v left %d", s.Outcome, s.Place, s.Evict, s.Gone, s.Left)
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestOrphaned(t *testing.T) {
	for _, tc := range []struct {
		c    Compute
		want Cancel
	}{
		{Compute{}, Keep},
		{Compute{RepReason: ReasonSurge, RepPhase: Scheduled, Replacing: "n2"}, Keep},
		{Compute{RepReason: ReasonDrain, RepPhase: Scheduled, Replacing: "n2"}, CancelNext},
		{Compute{RepReason: ReasonDrain, RepPhase: Failed, Replacing: "n2"}, CancelNext},
		{Compute{RepReason: ReasonDrain, RepPhase: Cancelling, Replacing: "n2"}, Keep},
		{Compute{RepReason: ReasonDrain, RepPhase: Blocked}, Clear},
		{Compute{RepReason: ReasonDrain, RepPhase: Active, Replacing: "n2"}, Keep},
		{Compute{RepReason: ReasonDrain, RepPhase: Evicting}, Keep},
	} {
		if got := Orphaned(tc.c); got != tc.want {
			t.Errorf("Orphaned(%+v) = %d, want %d", tc.c, got, tc.want)
		}
	}
}

func TestOnReport(t *testing.T) {
	inFlight := Compute{Node: "n1", Replacing: "n2", RepPhase: Scheduled}
	with := func(c Compute, f func(*Compute)) Compute { f(&c); return c }
	for _, tc := range []struct {
		name        string
		c           Compute
		node, state string
		want        Report
	}{
		{"current running", inFlight, "n1", StateRunning, Status},
		{"next running takes over", inFlight, "n2", StateRunning, NextActive},
		{"next running again", with(inFlight, func(c *Compute) { c.RepPhase = Active }), "n2", StateRunning, Ignore},
		{"next failed", inFlight, "n2", StateFailed, NextFailed},
		{"next failed then running", with(inFlight, func(c *Compute) { c.RepPhase = Failed }), "n2", StateRunning, NextActive},
		{"next deleted when cancelled", with(inFlight, func(c *Compute) { c.RepPhase = Cancelling }), "n2", StateDeleted, NextGone},
		{"next deleted of a deleted compute", with(inFlight, func(c *Compute) { c.Deleting = true }), "n2", StateDeleted, NextGone},
		{"current deleted once retired", with(inFlight, func(c *Compute) { c.RepPhase = Active }), "n1", StateDeleted, CurrentGone},
		{"current evicted", Compute{Node: "n1", RepPhase: Evicting}, "n1", StateDeleted, CurrentGone},
		{"current of a deleted compute with a next", with(inFlight, func(c *Compute) { c.Deleting = true }), "n1", StateDeleted, CurrentGone},
		{"current of a deleted compute", Compute{Node: "n1", Deleting: true}, "n1", StateDeleted, Drop},
		{"another node", inFlight, "n3", StateRunning, Ignore},
	} {
		if got := OnReport(tc.c, tc.node, tc.state); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestAuto(t *testing.T) {
	set := AutoNode{CordonAfter: 5 * time.Minute, DrainAfter: 30 * time.Minute, NotReadySince: t0}
	with := func(f func(*AutoNode)) AutoNode { n := set; f(&n); return n }
	for _, tc := range []struct {
		name string
		now  time.Time
		n    AutoNode
		want AutoAction
	}{
		{"not ready briefly", t0.Add(time.Minute), set, AutoNone},
		{"not ready for the cordon interval", t0.Add(5 * time.Minute), set, AutoCordon},
		{"already cordoned", t0.Add(10 * time.Minute), with(func(n *AutoNode) { n.Cordoned = true }), AutoNone},
		{"not ready for the drain interval", t0.Add(30 * time.Minute), with(func(n *AutoNode) { n.Cordoned = true }), AutoDrain},
		{"drained already", t0.Add(40 * time.Minute), with(func(n *AutoNode) { n.Cordoned, n.Drained = true, true }), AutoNone},
		{"off", t0.Add(time.Hour), with(func(n *AutoNode) { n.CordonAfter, n.DrainAfter = 0, 0 }), AutoNone},
		{"ready again, not long enough", t0.Add(3 * time.Minute), with(func(n *AutoNode) {
			n.Ready, n.Cordoned, n.AutoCordoned, n.ReadySince = true, true, true, t0
		}), AutoNone},
		{"ready again for the interval", t0.Add(5 * time.Minute), with(func(n *AutoNode) {
			n.Ready, n.Cordoned, n.AutoCordoned, n.ReadySince = true, true, true, t0
		}), AutoUncordon},
		{"ready, cordoned by an operator", t0.Add(time.Hour), with(func(n *AutoNode) {
			n.Ready, n.Cordoned, n.ReadySince = true, true, t0
		}), AutoNone},
		{"ready, auto-drained", t0.Add(time.Hour), with(func(n *AutoNode) {
			n.Ready, n.Cordoned, n.AutoCordoned, n.Drained, n.ReadySince = true, true, true, true, t0
		}), AutoNone},
	} {
		if got := Auto(tc.now, tc.n); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestParseAfter(t *testing.T) {
	for in, want := range map[string]string{"": "1m0s <nil>", "off": "0s <nil>", "5m": "5m0s <nil>",
		"-1m": `0s interval "-1m": want a positive duration (5m, 1h) or off`, "soon": `0s interval "soon": want a positive duration (5m, 1h) or off`} {
		d, err := ParseAfter(in, time.Minute)
		if got := fmt.Sprint(d, " ", err); got != want {
			t.Errorf("ParseAfter(%q) = %s, want %s", in, got, want)
		}
	}
}
