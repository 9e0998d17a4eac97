package service

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/topology"
)

func good() *unyov1.RegionService {
	return &unyov1.RegionService{Name: "web", Spec: &unyov1.RegionServiceSpec{Region: "tokyo",
		Compute: &unyov1.ComputeSpec{Flavor: "small", Image: "web", Provider: "exec", Replicas: 3}}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *unyov1.RegionService)
		want   string // "" for valid
	}{
		{"good", func(*unyov1.RegionService) {}, ""},
		{"zero replicas", func(s *unyov1.RegionService) { s.Spec.Compute.Replicas = 0 }, ""},
		{"never replaced", func(s *unyov1.RegionService) { s.Spec.Compute.ReplaceAfter = "never" }, ""},
		{"no region", func(s *unyov1.RegionService) { s.Spec.Region = "" }, "spec.region: required"},
		{"no compute", func(s *unyov1.RegionService) { s.Spec.Compute = nil }, "spec.compute: required"},
		{"no flavor", func(s *unyov1.RegionService) { s.Spec.Compute.Flavor = "" }, "spec.compute.flavor: required"},
		{"unknown provider", func(s *unyov1.RegionService) { s.Spec.Compute.Provider = "vmware" }, `spec.compute.provider: "vmware" is not a known provider (known: exec, docker, libvirt)`},
		{"negative replicas", func(s *unyov1.RegionService) { s.Spec.Compute.Replicas = -1 }, "spec.compute.replicas: must not be negative, got -1"},
		{"replace_after", func(s *unyov1.RegionService) { s.Spec.Compute.ReplaceAfter = "soon" }, `spec.compute.replace_after: "soon" is neither a positive duration`},
		{"operator", func(s *unyov1.RegionService) {
			s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{NodeLabels: []*unyov1.LabelRequirement{{Key: "disk", Operator: "Has"}}}
		}, `spec.compute.schedule.node_labels[0].operator: "Has" is not one of In, NotIn, Exists, DoesNotExist`},
		{"In without values", func(s *unyov1.RegionService) {
			s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{ClusterLabels: []*unyov1.LabelRequirement{{Key: "env", Operator: "In"}}}
		}, "spec.compute.schedule.cluster_labels[0].values: required with operator In"},
		{"Exists with values", func(s *unyov1.RegionService) {
			s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{NodeLabels: []*unyov1.LabelRequirement{{Key: "ssd", Operator: "Exists", Values: []string{"x"}}}}
		}, "must be empty with operator Exists"},
		{"when_unsatisfiable", func(s *unyov1.RegionService) {
			s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{Spread: []*unyov1.SpreadConstraint{{Key: "rack", WhenUnsatisfiable: "maybe"}}}
		}, `spec.compute.schedule.spread[0].when_unsatisfiable: "maybe" is not one of do_not_schedule, schedule_anyway`},
		{"strategy", func(s *unyov1.RegionService) { s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{Strategy: "random"} }, `spec.compute.schedule.strategy: "random" is not one of binpack, spread`},
		{"anti-affinity key", func(s *unyov1.RegionService) {
			s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{AntiAffinity: []*unyov1.AffinityTerm{{MaxPerDomain: 1}}}
		}, "spec.compute.schedule.anti_affinity[0].key: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			tt.change(s)
			err := Validate(s)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}

func compute(i int32, phase, reason, msg string) *unyov1.Compute {
	return &unyov1.Compute{Name: ReplicaName("web", int(i)), Index: i, Status: &unyov1.ComputeStatus{Phase: phase, Reason: reason, Message: msg}}
}

func TestDerive(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		computes []*unyov1.Compute
		deleting bool
		phase    string
		active   int32
		reason   string
	}{
		{"new", []*unyov1.Compute{compute(0, "", "", ""), compute(1, PhaseInitializing, "", ""), compute(2, PhaseInitializing, "", "")}, false, PhaseInitializing, 0, ""},
		{"handed to a cluster", []*unyov1.Compute{compute(0, PhaseCreating, "", ""), compute(1, PhaseInitializing, "", ""), compute(2, PhaseInitializing, "", "")}, false, PhaseCreating, 0, ""},
		{"scheduled", []*unyov1.Compute{compute(0, PhaseScheduled, "", ""), compute(1, PhaseActive, "", ""), compute(2, PhaseActive, "", "")}, false, PhaseCreating, 2, ""},
		{"active", []*unyov1.Compute{compute(0, PhaseActive, "", ""), compute(1, PhaseActive, "", ""), compute(2, PhaseActive, "", "")}, false, PhaseActive, 3, ""},
		{"too few", []*unyov1.Compute{compute(0, PhaseActive, "", ""), compute(1, PhaseActive, "", "")}, false, PhaseCreating, 2, ""},
		{"a deleting one does not count", []*unyov1.Compute{compute(0, PhaseActive, "", ""), compute(1, PhaseActive, "", ""), compute(2, PhaseActive, "", ""), compute(3, PhaseDeleting, "", "")}, false, PhaseActive, 3, ""},
		{"blocked", []*unyov1.Compute{compute(0, PhaseActive, "", ""), compute(2, PhaseBlocked, ReasonNoCapacity, "0/3 nodes fit"), compute(1, PhaseBlocked, ReasonNoCapacity, "0/4 nodes fit")}, false, PhaseBlocked, 1, ReasonNoCapacity},
		{"failed wins over blocked", []*unyov1.Compute{compute(0, PhaseBlocked, ReasonNoCapacity, ""), compute(1, PhaseFailed, ReasonProviderError, "exit 1"), compute(2, PhaseActive, "", "")}, false, PhaseFailed, 1, ReasonProviderError},
		{"updating", []*unyov1.Compute{compute(0, PhaseUpdating, "", ""), compute(1, PhaseActive, "", ""), compute(2, PhaseActive, "", "")}, false, PhaseUpdating, 2, ""},
		{"deleting", []*unyov1.Compute{compute(0, PhaseDeleting, "", "")}, true, PhaseDeleting, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			st := Derive(s, tt.computes, tt.deleting, now)
			if st.GetPhase() != tt.phase || st.GetActive() != tt.active || st.GetReason() != tt.reason || st.GetReplicas() != 3 {
				t.Fatalf("Derive = %v; want %s %d/3 %s", st, tt.phase, tt.active, tt.reason)
			}
			if !st.GetUpdatedAt().AsTime().Equal(now) {
				t.Errorf("updated_at = %v, want now for a new status", st.GetUpdatedAt())
			}
		})
	}
	// The first blocked replica by index names the reason.
	st := Derive(good(), tests[6].computes, false, now)
	if st.GetMessage() != "web-1: 0/4 nodes fit" {
		t.Errorf("message = %q", st.GetMessage())
	}
	// An unchanged status keeps its time; a change moves it.
	s := good()
	s.Status = proto.Clone(st).(*unyov1.RegionServiceStatus)
	later := now.Add(time.Minute)
	if again := Derive(s, tests[6].computes, false, later); !again.GetUpdatedAt().AsTime().Equal(now) || !SameStatus(again, s.Status) {
		t.Errorf("unchanged status moved: %v", again)
	}
	if changed := Derive(s, tests[3].computes, false, later); !changed.GetUpdatedAt().AsTime().Equal(later) {
		t.Errorf("changed status kept its time: %v", changed)
	}
}

func TestPlaceReplicasKeepsASetTogether(t *testing.T) {
	shape := schedule.Resources{VCPUs: 1, MemoryBytes: 1 << 30}
	free := func(cluster string, n int) []schedule.Node {
		out := make([]schedule.Node, n)
		for i := range out {
			out[i] = schedule.Node{Name: fmt.Sprintf("%s-%d", cluster, i), Capacity: schedule.Resources{VCPUs: 1, MemoryBytes: 1 << 30}}
		}
		return out
	}
	clusters := func() []schedule.Cluster {
		return []schedule.Cluster{{Name: "a", Region: "tokyo", Weight: 1, Nodes: free("a", 2)}, {Name: "b", Region: "tokyo", Weight: 1, Nodes: free("b", 3)}}
	}
	live := []*unyov1.Compute{{Name: "web-0", Index: 0}, {Name: "web-1", Index: 1}, {Name: "web-2", Index: 2}}

	got, reason := PlaceReplicas(good(), live, clusters(), shape, nil)
	if reason != nil || got["web-0"] != "b" || got["web-2"] != "b" {
		t.Fatalf("placed %v (%v); want all three in b, the only cluster holding them", got, reason)
	}
	// A new replica joins the cluster its set is in, even when another
	// cluster ranks higher.
	live[0].Cluster, live[1].Cluster = "a", "a"
	got, reason = PlaceReplicas(good(), live, clusters(), shape, nil)
	if reason != nil || len(got) != 1 || got["web-2"] != "a" {
		t.Fatalf("placed %v (%v); want web-2 with its set in a", got, reason)
	}
	// A cluster that turned the set down is skipped.
	live[0].Cluster, live[1].Cluster = "", ""
	got, reason = PlaceReplicas(good(), live, clusters(), shape, []string{"b"})
	if len(got) != 0 || reason == nil || reason.Class != schedule.NoCapacity || !strings.Contains(reason.String(), "b turned them down") {
		t.Fatalf("placed %v (%v); want none, b excluded and a too small", got, reason)
	}
	// With allow_split the set spans clusters.
	s := good()
	s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{AllowSplit: true}
	cs := clusters()
	cs[1].Nodes = free("b", 1)
	got, reason = PlaceReplicas(s, live, cs, shape, nil)
	if reason != nil || got["web-0"] != "a" || got["web-1"] != "a" || got["web-2"] != "b" {
		t.Fatalf("placed %v (%v); want a, a, b", got, reason)
	}
	if cs[0].Fits(shape) != 0 || cs[1].Fits(shape) != 0 {
		t.Errorf("the placed replicas were not taken from the clusters' free capacity: %v", cs)
	}
}

func TestPlan(t *testing.T) {
	node := func(name, zone string) schedule.Node {
		return schedule.Node{Name: name, Labels: map[string]string{topology.LabelZone: zone},
			Capacity: schedule.Resources{VCPUs: 4, MemoryBytes: 8 << 30, DiskBytes: 100 << 30}}
	}
	cs := []ClusterNodes{
		{Name: "c1", Attrs: &unyov1.Cluster{Spec: &unyov1.ClusterSpec{Region: "tokyo"}}, Nodes: []schedule.Node{node("n1", "az1"), node("n2", "az2"), node("n3", "az3")}},
		{Name: "c2", Attrs: &unyov1.Cluster{Spec: &unyov1.ClusterSpec{Region: "osaka"}}, Nodes: []schedule.Node{node("m1", "az1")}},
	}
	s := good()
	s.Spec.Compute.Schedule = &unyov1.SchedulePolicy{AntiAffinity: []*unyov1.AffinityTerm{{Key: schedule.LabelHostname}}}
	lines := Plan(s, schedule.Resources{VCPUs: 2, MemoryBytes: 4 << 30}, cs)
	text := PlanText(lines)
	for _, want := range []string{"web-0\tc1\tn1\t-", "web-1\tc1\tn2\t-", "web-2\tc1\tn3\t-"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}
	s.Spec.Compute.Replicas = 4
	lines = Plan(s, schedule.Resources{VCPUs: 2, MemoryBytes: 4 << 30}, cs)
	// c1 fits 6 by capacity, but its nodes' anti-affinity takes 3 (the
	// cluster stage runs the node stage's hard rules), and the set is not
	// split: no replica goes anywhere, for good.
	for _, l := range lines {
		if l.Cluster != "" || !strings.Contains(l.Reason, "Unsatisfiable") || !strings.Contains(l.Reason, "c1 fits 3 (0/3 nodes fit: 3 anti-affinity on hostname") {
			t.Errorf("%+v; want refused by anti-affinity at the cluster stage", l)
		}
	}
	s.Spec.Region = "nara"
	lines = Plan(s, schedule.Resources{VCPUs: 2, MemoryBytes: 4 << 30}, cs)
	if l := lines[0]; l.Cluster != "" || !strings.Contains(l.Reason, `c1 in region "tokyo"`) {
		t.Errorf("line 0 = %+v; want refused by region", l)
	}
}

func TestBlocked(t *testing.T) {
	shape := schedule.Resources{VCPUs: 1, MemoryBytes: 1 << 30}
	for _, tt := range []struct {
		name     string
		clusters []schedule.Cluster
		phase    string
		reason   string
	}{
		{"no cluster registered yet", nil, PhaseBlocked, ReasonNoCapacity},
		{"a cluster without nodes", []schedule.Cluster{{Name: "a", Region: "tokyo"}}, PhaseBlocked, ReasonNoCapacity},
		{"a full cluster", []schedule.Cluster{{Name: "a", Region: "tokyo", Nodes: []schedule.Node{{Name: "n", Capacity: shape, Reserved: shape}}}}, PhaseBlocked, ReasonNoCapacity},
		{"no cluster in the region", []schedule.Cluster{{Name: "a", Region: "osaka"}}, PhaseFailed, ReasonUnsatisfiable},
		// Session 9: "c1 fits 0" left this Blocked forever.
		{"every node smaller than the flavor", []schedule.Cluster{{Name: "a", Region: "tokyo", Nodes: []schedule.Node{{Name: "n", Capacity: schedule.Resources{VCPUs: 8, MemoryBytes: 1 << 29}}}}}, PhaseFailed, ReasonUnsatisfiable},
	} {
		res := schedule.PlaceClusters(tt.clusters, schedule.Request{Shape: shape}, 1, ClusterPolicy(good(), nil))
		if st := Blocked(res.Reason); st.GetPhase() != tt.phase || st.GetReason() != tt.reason {
			t.Errorf("%s: %s %s, want %s %s (%s)", tt.name, st.GetPhase(), st.GetReason(), tt.phase, tt.reason, st.GetMessage())
		}
	}
}

// ClustersOf gives each cluster the nodes ListNodes says are its own.
func TestClustersOf(t *testing.T) {
	clusters := []*unyov1.ClusterInfo{{Name: "c1", Attributes: &unyov1.Cluster{Name: "c1"}}, {Name: "c2"}}
	nodes := []*unyov1.Node{{Name: "n1", Cluster: "c1"}, {Name: "m1", Cluster: "c2"}, {Name: "n2", Cluster: "c1"}, {Name: "x", Cluster: "c3"}}
	got := ClustersOf(clusters, nodes)
	if len(got) != 2 || got[0].Name != "c1" || got[0].Attrs.GetName() != "c1" || got[1].Name != "c2" {
		t.Fatalf("clusters %+v", got)
	}
	var names []string
	for _, c := range got {
		for _, n := range c.Nodes {
			names = append(names, c.Name+"/"+n.Name)
		}
	}
	if s := strings.Join(names, " "); s != "c1/n1 c1/n2 c2/m1" {
		t.Errorf("nodes %s", s)
	}
}
