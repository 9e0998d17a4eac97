package schedule

import (
	"slices"

	"github.com/unyo-ops/unyo/provision/topology"
)

// LabelHostname is a label every node carries implicitly: its value is the
// node's name, so "at most one replica per node" is anti-affinity over it.
const LabelHostname = topology.Prefix + "hostname"

// Resources is an amount of vCPUs, memory and disk: a node's capacity, its
// reservations, or one replica's shape.
type Resources struct {
	VCPUs       int64
	MemoryBytes int64
	DiskBytes   int64
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.VCPUs + o.VCPUs, r.MemoryBytes + o.MemoryBytes, r.DiskBytes + o.DiskBytes}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.VCPUs - o.VCPUs, r.MemoryBytes - o.MemoryBytes, r.DiskBytes - o.DiskBytes}
}

// Fits says whether r fits in free, dimension by dimension.
func (r Resources) Fits(free Resources) bool {
	return r.VCPUs <= free.VCPUs && r.MemoryBytes <= free.MemoryBytes && r.DiskBytes <= free.DiskBytes
}

// Resource names one dimension of Resources.
type Resource uint8

// The dimensions, in the order the fit filter checks them.
const (
	VCPU Resource = iota
	Memory
	Disk
)

func (r Resource) String() string {
	switch r {
	case VCPU:
		return "vCPU"
	case Memory:
		return "memory"
	default:
		return "disk"
	}
}

// Get returns one dimension of r.
func (r Resources) Get(d Resource) int64 {
	switch d {
	case VCPU:
		return r.VCPUs
	case Memory:
		return r.MemoryBytes
	default:
		return r.DiskBytes
	}
}

// NodeState is what the cluster knows of a node's liveness.
type NodeState int

// Only Ready nodes take new replicas.
const (
	Ready NodeState = iota
	Stale
	Down
)

func (s NodeState) String() string {
	switch s {
	case Ready:
		return "ready"
	case Stale:
		return "stale"
	default:
		return "down"
	}
}

// Node is one node as the scheduler sees it.
type Node struct {
	Name string
	// Labels include the topology.unyo.dev/* labels root derives from the
	// inventory.
	Labels map[string]string
	// Capacity is what the node offers; Reserved is the sum of every
	// reservation held on it (of every service).
	Capacity Resources
	Reserved Resources
	State    NodeState
	// Cordoned nodes keep their replicas but take no new ones; Draining
	// nodes are being emptied.
	Cordoned bool
	Draining bool
	// Providers are the provider plugins the node's agent runs healthy
	// (from their fingerprints); nil when the agent reported none.
	Providers map[string]bool
	// Generation is the node's version in the store; a Choice carries it so
	// the caller can commit with optimistic concurrency.
	Generation int64
}

// Free is the capacity not yet reserved.
func (n *Node) Free() Resources { return n.Capacity.Sub(n.Reserved) }

// Value returns the node's value for a label key (its domain for that key).
func (n *Node) Value(key string) (string, bool) {
	if key == LabelHostname {
		return n.Name, true
	}
	v, ok := n.Labels[key]
	return v, ok
}

// Operator is how a Selector matches a label.
type Operator string

// Operators, as in Kubernetes' node selector requirements.
const (
	In           Operator = "In"
	NotIn        Operator = "NotIn"
	Exists       Operator = "Exists"
	DoesNotExist Operator = "DoesNotExist"
)

// Selector is one label requirement (the seeds' NodeLabelFilters and
// ClusterLabelFilters). A node or cluster must match every selector given.
type Selector struct {
	Key      string
	Operator Operator
	Values   []string
}

// Matches says whether labels satisfy the selector.
func (s Selector) Matches(labels map[string]string) bool {
	v, ok := labels[s.Key]
	switch s.Operator {
	case Exists:
		return ok
	case DoesNotExist:
		return !ok
	case NotIn:
		return !ok || !slices.Contains(s.Values, v)
	default: // In
		return ok && slices.Contains(s.Values, v)
	}
}

func matchesAll(sel []Selector, labels map[string]string) bool {
	for _, s := range sel {
		if !s.Matches(labels) {
			return false
		}
	}
	return true
}

// Term is an affinity or anti-affinity rule over one label key; the key's
// values are its domains (rack, power, network, zone, hostname, or any
// other label).
type Term struct {
	Key string
	// Values, for affinity only, restrict the replicas to these domains;
	// without them the first replica picks the domain and the rest follow.
	Values []string
	// MaxPerDomain, for anti-affinity only, is how many replicas of the
	// service a domain may hold (default 1).
	MaxPerDomain int
	// Weight, for soft terms only, is the term's share of the score
	// (default 1).
	Weight int
}

func (t Term) maxPerDomain() int { return max(t.MaxPerDomain, 1) }
func (t Term) weight() float64   { return float64(max(t.Weight, 1)) }

// WhenUnsatisfiable says what a Spread does when no node keeps the skew.
type WhenUnsatisfiable string

// The two behaviours of Kubernetes' topology spread constraints.
const (
	DoNotSchedule  WhenUnsatisfiable = "do_not_schedule"
	ScheduleAnyway WhenUnsatisfiable = "schedule_anyway"
)

// Spread keeps the replicas of a service balanced over a key's domains: a
// replica may go to a domain only if that domain's count after placement
// exceeds the least loaded domain's count by at most MaxSkew (default 1).
// The domains are the key's values among the nodes that pass the name,
// label, state and schedulable filters, so an empty domain counts as zero
// (and a zone whose nodes are all full blocks a do_not_schedule spread until
// capacity appears there: NoCapacity).
type Spread struct {
	Key               string
	MaxSkew           int
	WhenUnsatisfiable WhenUnsatisfiable
}

func (s Spread) hard() bool   { return s.WhenUnsatisfiable != ScheduleAnyway }
func (s Spread) maxSkew() int { return max(s.MaxSkew, 1) }

// Strategy ranks the nodes that fit.
type Strategy string

// Binpack (the default) fills nodes before opening new ones; Spread prefers
// the emptiest node.
const (
	Binpack     Strategy = "binpack"
	SpreadNodes Strategy = "spread"
)

// Policy is the node stage's part of a service's schedule policy.
type Policy struct {
	// Nodes, when set, are the only nodes allowed (the seeds' NodeFilters).
	Nodes []string
	// Selectors must all match a node's labels (NodeLabelFilters).
	Selectors []Selector
	// Hard rules: a node breaking one is infeasible, and a node lacking a
	// hard rule's key is infeasible too.
	Affinity     []Term
	AntiAffinity []Term
	// Soft rules only score.
	SoftAffinity     []Term
	SoftAntiAffinity []Term
	Spread           []Spread
	Strategy         Strategy
	// NoDefaultSpread turns off the implicit soft spread over
	// topology.unyo.dev/zone that a policy gets when none of its rules
	// mentions the zone key.
	NoDefaultSpread bool
}

// withDefaults returns the policy with the default zone spread added: by
// default a service's replicas spread over the region's logical zones.
func (p Policy) withDefaults() Policy {
	if p.NoDefaultSpread {
		return p
	}
	for _, ts := range [][]Term{p.Affinity, p.AntiAffinity, p.SoftAffinity, p.SoftAntiAffinity} {
		for _, t := range ts {
			if t.Key == topology.LabelZone {
				return p
			}
		}
	}
	for _, s := range p.Spread {
		if s.Key == topology.LabelZone {
			return p
		}
	}
	p.Spread = append(slices.Clip(p.Spread), Spread{Key: topology.LabelZone, MaxSkew: 1, WhenUnsatisfiable: ScheduleAnyway})
	return p
}

// Placement is one existing replica of the service.
type Placement struct {
	Node string
	// Labels are the node's labels; when nil, Place looks them up among the
	// nodes it is given (Check needs them).
	Labels map[string]string
}

// Request is what to place: replicas of one shape for one service.
type Request struct {
	Service string
	Shape   Resources
	Policy  Policy
	// Provider, when set, is the plugin that realizes the replica: only
	// nodes offering it healthy are feasible.
	Provider string
	// Shapeless places something that reserves nothing (a load balancer:
	// only a node offering Provider matters); Shape must then be zero.
	Shapeless bool
	// Existing are the service's replicas already placed; rules count them.
	Existing []Placement
}

// Choice is one placed replica: the node and the generation it was chosen
// at.
type Choice struct {
	Node       string
	Generation int64
}
