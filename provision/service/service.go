// Package service is the domain logic of RegionServices at root (DESIGN.md,
// "Provisioning"): validating a service, naming its replicas, turning its
// schedule policy and flavor into provision/schedule's terms, planning the
// cluster stage, and deriving a service's phase from its replicas' statuses.
// It is pure: root's controller (core/root/provision.go) does the I/O.
package service

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/provision/autoscale"
	"github.com/unyo-ops/unyo/provision/catalog"
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// Kind names, as references and the store write them.
const (
	KindService = "RegionService"
	KindCompute = "Compute"
)

// Phase words of services and computes (the seeds' status flows).
const (
	PhaseInitializing = "Initializing"
	PhaseCreating     = "Creating"
	PhaseScheduled    = "Creating:Scheduled"
	PhaseActive       = "Active"
	PhaseUpdating     = "Updating"
	PhaseDeleting     = "Deleting"
	PhaseDeleted      = "Deleted"
	PhaseFailed       = "Failed"
	PhaseBlocked      = "Blocked"
)

// Reason codes of a Blocked or Failed replica.
const (
	ReasonNoCapacity    = "NoCapacity"
	ReasonUnsatisfiable = "Unsatisfiable"
	ReasonProviderError = "ProviderError"
	ReasonNodeDown      = "NodeDown"
)

// Providers are the provider plugins a compute may name; "exec" is the
// bundled plugins/provider-exec.
var Providers = []string{"exec", "docker", "libvirt"}

// DefaultReplaceAfter is how long a replica's node may be Down before the
// replica is replaced elsewhere, when replace_after is empty.
const DefaultReplaceAfter = 5 * time.Minute

// ReplaceNever is replace_after's word for replicas that must not move.
const ReplaceNever = "never"

var operators = []string{string(schedule.In), string(schedule.NotIn), string(schedule.Exists), string(schedule.DoesNotExist)}

// Validate checks a RegionService on its own, naming every invalid field;
// that its region, flavor, image and network exist is checked by the
// references (Refs).
func Validate(s *unyov1.RegionService) error {
	var f validate.Fields
	f.Name("name", s.GetName())
	spec := s.GetSpec()
	if spec.GetRegion() == "" {
		f.Add("spec.region", "required: the region the replicas run in")
	}
	c := spec.GetCompute()
	if c == nil {
		f.Add("spec.compute", "required: at least spec.compute.flavor, image and provider")
		return f.Err(KindService, s.GetName())
	}
	for _, req := range [...]struct{ field, v string }{
		{"spec.compute.flavor", c.GetFlavor()}, {"spec.compute.image", c.GetImage()},
	} {
		if req.v == "" {
			f.Add(req.field, "required")
		}
	}
	switch p := c.GetProvider(); {
	case p == "":
		f.Addf("spec.compute.provider", "required: one of %s", strings.Join(Providers, ", "))
	case !slices.Contains(Providers, p):
		f.Addf("spec.compute.provider", "%q is not a known provider (known: %s)", p, strings.Join(Providers, ", "))
	}
	if c.GetReplicas() < 0 {
		f.Addf("spec.compute.replicas", "must not be negative, got %d", c.GetReplicas())
	}
	if _, err := ReplaceAfter(c.GetReplaceAfter()); err != nil {
		f.Add("spec.compute.replace_after", err.Error())
	}
	validatePolicy(&f, "spec.compute.schedule", c.GetSchedule())
	if u := c.GetUpdate(); u.GetMaxUnavailable() < 0 || u.GetMaxSurge() < 0 {
		f.Add("spec.compute.update", "max_unavailable and max_surge must not be negative")
	}
	autoscale.Validate(&f, "spec.compute.autoscale", c.GetAutoscale())
	validateLoadbalancer(&f, "spec.loadbalancer", spec.GetLoadbalancer())
	if spec.GetLoadbalancer() != nil && c.GetNetwork() == "" {
		f.Add("spec.loadbalancer", "needs spec.compute.network: the VIP and the backends' addresses come from it")
	}
	for k := range c.GetEnv() {
		if err := validate.EnvName(k); err != nil {
			f.Addf(fmt.Sprintf("spec.compute.env[%q]", k), "%v", err)
		}
	}
	return f.Err(KindService, s.GetName())
}

func validatePolicy(f *validate.Fields, field string, p *unyov1.SchedulePolicy) {
	for i, r := range p.GetClusterLabels() {
		validateRequirement(f, fmt.Sprintf("%s.cluster_labels[%d]", field, i), r)
	}
	for i, r := range p.GetNodeLabels() {
		validateRequirement(f, fmt.Sprintf("%s.node_labels[%d]", field, i), r)
	}
	for name, terms := range map[string][]*unyov1.AffinityTerm{
		"affinity": p.GetAffinity(), "anti_affinity": p.GetAntiAffinity(),
		"soft_affinity": p.GetSoftAffinity(), "soft_anti_affinity": p.GetSoftAntiAffinity(),
	} {
		for i, t := range terms {
			tf := fmt.Sprintf("%s.%s[%d]", field, name, i)
			if t.GetKey() == "" {
				f.Add(tf+".key", "required: the label key whose values are the domains")
			}
			if t.GetMaxPerDomain() < 0 || t.GetWeight() < 0 {
				f.Add(tf, "max_per_domain and weight must not be negative")
			}
		}
	}
	for i, s := range p.GetSpread() {
		sf := fmt.Sprintf("%s.spread[%d]", field, i)
		if s.GetKey() == "" {
			f.Add(sf+".key", "required: the topology key to spread over")
		}
		if s.GetMaxSkew() < 0 {
			f.Addf(sf+".max_skew", "must not be negative, got %d", s.GetMaxSkew())
		}
		if w := s.GetWhenUnsatisfiable(); w != "" && w != string(schedule.DoNotSchedule) && w != string(schedule.ScheduleAnyway) {
			f.Addf(sf+".when_unsatisfiable", "%q is not one of %s, %s", w, schedule.DoNotSchedule, schedule.ScheduleAnyway)
		}
	}
	if s := p.GetStrategy(); s != "" && s != string(schedule.Binpack) && s != string(schedule.SpreadNodes) {
		f.Addf(field+".strategy", "%q is not one of %s, %s", s, schedule.Binpack, schedule.SpreadNodes)
	}
}

func validateRequirement(f *validate.Fields, field string, r *unyov1.LabelRequirement) {
	if r.GetKey() == "" {
		f.Add(field+".key", "required")
	}
	op := r.GetOperator()
	switch {
	case !slices.Contains(operators, op):
		f.Addf(field+".operator", "%q is not one of %s", op, strings.Join(operators, ", "))
	case (op == string(schedule.In) || op == string(schedule.NotIn)) && len(r.GetValues()) == 0:
		f.Addf(field+".values", "required with operator %s", op)
	case (op == string(schedule.Exists) || op == string(schedule.DoesNotExist)) && len(r.GetValues()) > 0:
		f.Addf(field+".values", "must be empty with operator %s", op)
	}
}

// ReplaceAfter parses replace_after: "" is DefaultReplaceAfter, "never" is
// 0 with ok false.
func ReplaceAfter(s string) (d time.Duration, err error) {
	switch s {
	case "":
		return DefaultReplaceAfter, nil
	case ReplaceNever:
		return 0, nil
	}
	d, err = time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is neither a positive duration (such as 5m) nor %q", s, ReplaceNever)
	}
	return d, nil
}

// Refs are the objects a service names: deleting one of them is refused
// while the service names it.
func Refs(s *unyov1.RegionService) []kinds.Reference {
	c := s.GetSpec().GetCompute()
	return []kinds.Reference{
		{Field: "spec.region", Kind: "Region", Name: s.GetSpec().GetRegion()},
		{Field: "spec.compute.flavor", Kind: "Flavor", Name: c.GetFlavor()},
		{Field: "spec.compute.image", Kind: "Image", Name: c.GetImage()},
		{Field: "spec.compute.network", Kind: "Network", Name: c.GetNetwork()},
	}
}

// ReplicaName is the name of a service's replica: NAME-INDEX.
func ReplicaName(service string, index int) string { return service + "-" + strconv.Itoa(index) }

// Shape is a flavor's size as the scheduler counts it.
func Shape(f *unyov1.Flavor) (schedule.Resources, error) {
	s := f.GetSpec()
	mem, err := catalog.ParseQuantity(s.GetMemory())
	if err != nil {
		return schedule.Resources{}, fmt.Errorf("flavor %q: spec.memory: %w", f.GetName(), err)
	}
	var disk int64
	if s.GetDisk() != "" {
		if disk, err = catalog.ParseQuantity(s.GetDisk()); err != nil {
			return schedule.Resources{}, fmt.Errorf("flavor %q: spec.disk: %w", f.GetName(), err)
		}
	}
	return schedule.Resources{VCPUs: int64(s.GetVcpus()), MemoryBytes: mem, DiskBytes: disk}, nil
}

// Resources is a shape as a Compute carries it.
func Resources(r schedule.Resources) *unyov1.ComputeResources {
	return &unyov1.ComputeResources{Vcpus: r.VCPUs, MemoryBytes: r.MemoryBytes, DiskBytes: r.DiskBytes}
}

func selectors(rs []*unyov1.LabelRequirement) []schedule.Selector {
	out := make([]schedule.Selector, len(rs))
	for i, r := range rs {
		out[i] = schedule.Selector{Key: r.GetKey(), Operator: schedule.Operator(r.GetOperator()), Values: r.GetValues()}
	}
	return out
}

func terms(ts []*unyov1.AffinityTerm) []schedule.Term {
	out := make([]schedule.Term, len(ts))
	for i, t := range ts {
		out[i] = schedule.Term{Key: t.GetKey(), Values: t.GetValues(), MaxPerDomain: int(t.GetMaxPerDomain()), Weight: int(t.GetWeight())}
	}
	return out
}

// ClusterPolicy is the cluster stage's part of a service's policy.
func ClusterPolicy(s *unyov1.RegionService, exclude []string) schedule.ClusterPolicy {
	p := s.GetSpec().GetCompute().GetSchedule()
	return schedule.ClusterPolicy{Region: s.GetSpec().GetRegion(), Clusters: p.GetClusters(),
		Selectors: selectors(p.GetClusterLabels()), AllowSplit: p.GetAllowSplit(), Exclude: exclude}
}

// NodePolicy is the node stage's part of a service's policy.
func NodePolicy(s *unyov1.RegionService) schedule.Policy {
	p := s.GetSpec().GetCompute().GetSchedule()
	pol := schedule.Policy{Nodes: p.GetNodes(), Selectors: selectors(p.GetNodeLabels()),
		Affinity: terms(p.GetAffinity()), AntiAffinity: terms(p.GetAntiAffinity()),
		SoftAffinity: terms(p.GetSoftAffinity()), SoftAntiAffinity: terms(p.GetSoftAntiAffinity()),
		Strategy: schedule.Strategy(p.GetStrategy()), NoDefaultSpread: p.GetNoDefaultSpread()}
	for _, sp := range p.GetSpread() {
		pol.Spread = append(pol.Spread, schedule.Spread{Key: sp.GetKey(), MaxSkew: int(sp.GetMaxSkew()),
			WhenUnsatisfiable: schedule.WhenUnsatisfiable(sp.GetWhenUnsatisfiable())})
	}
	return pol
}

// Node is a cluster's node as the scheduler sees it: its labels (the
// topology labels winning), capacity, reservations and schedulability.
func Node(n *unyov1.Node) schedule.Node {
	labels := make(map[string]string, len(n.GetLabels())+len(n.GetTopologyLabels()))
	for k, v := range n.GetLabels() {
		labels[k] = v
	}
	for k, v := range n.GetTopologyLabels() {
		labels[k] = v
	}
	state := schedule.Ready
	switch n.GetState() {
	case unyov1.NodeState_NODE_STATE_STALE:
		state = schedule.Stale
	case unyov1.NodeState_NODE_STATE_DOWN:
		state = schedule.Down
	}
	capRes := func(c *unyov1.Capacity) schedule.Resources {
		return schedule.Resources{VCPUs: int64(c.GetCpus()), MemoryBytes: c.GetMemoryBytes(), DiskBytes: c.GetDiskBytes()}
	}
	// The capacity is the node stage's: the least of the machine's and its
	// providers' (placement.Capacity).
	return schedule.Node{Name: n.GetName(), Labels: labels, Capacity: placement.Capacity(n), Reserved: capRes(n.GetReserved()),
		State: state, Cordoned: n.GetCordoned(), Draining: n.GetDraining(), Providers: placement.Providers(n.GetProviders()), Generation: n.GetGeneration()}
}

// Schedulable says whether a node takes new replicas at all.
func Schedulable(n schedule.Node) bool {
	return n.State == schedule.Ready && !n.Cordoned && !n.Draining
}

// Cluster is a cluster as the cluster stage sees it: its attributes and
// nodes (copied: the stage counts what it gives in them).
func Cluster(name string, attrs *unyov1.Cluster, nodes []schedule.Node) schedule.Cluster {
	return schedule.Cluster{Name: name, Region: attrs.GetSpec().GetRegion(), Labels: attrs.GetLabels(),
		Weight: max(int(attrs.GetSpec().GetWeight()), 1), Nodes: slices.Clone(nodes)}
}

// Take counts replicas of shape reserved on the chosen nodes of a cluster,
// so that the next service of the same pass sees what this one was given.
func Take(c *schedule.Cluster, shape schedule.Resources, chosen []schedule.Choice) {
	for _, ch := range chosen {
		if i := slices.IndexFunc(c.Nodes, func(n schedule.Node) bool { return n.Name == ch.Node }); i >= 0 {
			c.Nodes[i].Reserved = c.Nodes[i].Reserved.Add(shape)
		}
	}
}
