package service

import (
	"slices"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// MaxHandoffs is how many clusters may turn a service's replicas down
// (Blocked, NoCapacity) before root stops passing them on: they then wait
// Blocked in the last cluster, which places them as soon as capacity
// appears there. Three clusters tried in all bounds the churn of a
// replica set bouncing between full clusters.
const MaxHandoffs = 2

// ClusterNodes is one cluster with its attributes and nodes as root sees
// them.
type ClusterNodes struct {
	Name  string
	Attrs *unyov1.Cluster
	Nodes []schedule.Node
}

// ClustersOf pairs the clusters with their nodes, as ListClusters and
// ListNodes at root answer them (`unyo services plan`, the console's plan).
func ClustersOf(clusters []*unyov1.ClusterInfo, nodes []*unyov1.Node) []ClusterNodes {
	out := make([]ClusterNodes, 0, len(clusters))
	for _, ci := range clusters {
		c := ClusterNodes{Name: ci.GetName(), Attrs: ci.GetAttributes()}
		for _, n := range nodes {
			if n.GetCluster() == ci.GetName() {
				c.Nodes = append(c.Nodes, Node(n))
			}
		}
		out = append(out, c)
	}
	return out
}

// Clusters is the cluster stage's view of clusters.
func Clusters(cs []ClusterNodes) []schedule.Cluster {
	out := make([]schedule.Cluster, len(cs))
	for i, c := range cs {
		out[i] = Cluster(c.Name, c.Attrs, c.Nodes)
	}
	return out
}

// PlaceReplicas is the cluster stage for one service: it gives every live
// replica that has no cluster yet (in index order) a cluster. Without
// allow_split, replicas join the cluster the service's other replicas are
// in; otherwise schedule.PlaceClusters chooses, skipping the clusters in
// exclude (those that turned the service down) and counting the replicas
// each cluster already has against the hard rules. What it gives is taken
// from the clusters' nodes, so that services placed later in the same
// pass see it. The replicas no cluster took are left out of the answer,
// and reason says why.
func PlaceReplicas(s *unyov1.RegionService, live []*unyov1.Compute, clusters []schedule.Cluster, shape schedule.Resources, exclude []string) (map[string]string, *schedule.ClusterReason) {
	var todo []*unyov1.Compute
	var current string
	pol := ClusterPolicy(s, exclude)
	for _, c := range live {
		switch {
		case c.GetCluster() == "":
			todo = append(todo, c)
			continue
		case c.GetStatus().GetNode() != "":
			if pol.Placed == nil {
				pol.Placed = map[string][]schedule.Placement{}
			}
			pol.Placed[c.GetCluster()] = append(pol.Placed[c.GetCluster()], schedule.Placement{Node: c.GetStatus().GetNode()})
		default:
			if pol.Pending == nil {
				pol.Pending = map[string]int{}
			}
			pol.Pending[c.GetCluster()]++
		}
		if !slices.Contains(exclude, c.GetCluster()) {
			current = c.GetCluster()
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	slices.SortFunc(todo, func(a, b *unyov1.Compute) int { return int(a.GetIndex() - b.GetIndex()) })
	req := schedule.Request{Service: s.GetName(), Shape: shape, Policy: NodePolicy(s), Provider: s.GetSpec().GetCompute().GetProvider()}
	out := map[string]string{}
	if current != "" && !s.GetSpec().GetCompute().GetSchedule().GetAllowSplit() {
		// The set stays together; the cluster's node stage says why when
		// it cannot take them.
		for _, c := range todo {
			out[c.GetName()] = current
		}
		if i := slices.IndexFunc(clusters, func(c schedule.Cluster) bool { return c.Name == current }); i >= 0 {
			req.Existing = pol.Placed[current]
			pending := pol.Pending[current]
			got := schedule.NewSnapshot(clusters[i].Nodes).Place(req, pending+len(todo))
			Take(&clusters[i], shape, got.Placed[min(pending, len(got.Placed)):])
		}
		return out, nil
	}
	res := schedule.PlaceClusters(clusters, req, len(todo), pol)
	i := 0
	for _, a := range res.Assignments {
		for range a.Replicas {
			out[todo[i].GetName()] = a.Cluster
			i++
		}
	}
	for j := range clusters {
		Take(&clusters[j], shape, res.Chosen[clusters[j].Name])
	}
	return out, res.Reason
}

// ClusterReasons are a cluster-stage reason as a Compute status carries
// them: one entry per cluster.
func ClusterReasons(r *schedule.ClusterReason) []*unyov1.ScheduleReasonCount {
	out := make([]*unyov1.ScheduleReasonCount, 0, len(r.Rejections))
	for _, j := range r.Rejections {
		out = append(out, &unyov1.ScheduleReasonCount{Code: j.Cluster, Count: int32(j.Fits), Detail: j.String()})
	}
	return out
}

// Blocked is the status of a replica the cluster stage could not place:
// Blocked with NoCapacity when capacity appearing could help (a cluster
// registering counts: with none registered yet the replica waits), Failed
// with Unsatisfiable when it cannot.
func Blocked(r *schedule.ClusterReason) *unyov1.ComputeStatus {
	st := &unyov1.ComputeStatus{Phase: PhaseBlocked, Reason: ReasonNoCapacity, Message: r.String(), Reasons: ClusterReasons(r)}
	if r.Class == schedule.Unsatisfiable && (r.Clusters > 0 || r.Invalid != "") {
		st.Phase, st.Reason = PhaseFailed, ReasonUnsatisfiable
	}
	return st
}

// PlanLine is where one replica would go, or why it would not.
type PlanLine struct {
	Replica, Cluster, Node, Reason string
}

// Plan says where a service's replicas would go, running the cluster stage
// and then the node stage on the chosen clusters' nodes as given, without
// reserving anything. Replicas the service already has are not counted:
// the plan is for the document as if it were new.
func Plan(s *unyov1.RegionService, shape schedule.Resources, cs []ClusterNodes) []PlanLine {
	n := int(s.GetSpec().GetCompute().GetReplicas())
	live := make([]*unyov1.Compute, n)
	for i := range live {
		live[i] = &unyov1.Compute{Name: ReplicaName(s.GetName(), i), Index: int32(i)}
	}
	where, reason := PlaceReplicas(s, live, Clusters(cs), shape, nil)
	lines := make([]PlanLine, n)
	per := map[string][]int{}
	for i, c := range live {
		lines[i].Replica = c.GetName()
		if cl, ok := where[c.GetName()]; ok {
			lines[i].Cluster = cl
			per[cl] = append(per[cl], i)
		} else if reason != nil {
			lines[i].Reason = reason.Class.String() + ": " + reason.String()
		}
	}
	for _, c := range cs {
		idx := per[c.Name]
		if len(idx) == 0 {
			continue
		}
		res := schedule.Place(c.Nodes, schedule.Request{Service: s.GetName(), Shape: shape, Policy: NodePolicy(s)}, len(idx))
		for k, i := range idx {
			if k < len(res.Placed) {
				lines[i].Node = res.Placed[k].Node
			} else {
				lines[i].Reason = res.Reason.Class.String() + ": " + res.Reason.String()
			}
		}
	}
	return lines
}

// PlanText renders a plan as a table an operator reads.
func PlanText(lines []PlanLine) string {
	var b strings.Builder
	b.WriteString("REPLICA\tCLUSTER\tNODE\tREASON\n")
	for _, l := range lines {
		b.WriteString(strings.Join([]string{l.Replica, dash(l.Cluster), dash(l.Node), dash(l.Reason)}, "\t") + "\n")
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
