package schedule

import (
	"fmt"
)

// Result is the outcome of placing n replicas.
type Result struct {
	// Placed are the chosen nodes, one per placed replica, in order.
	Placed []Choice
	// Unplaced counts the replicas that found no node; Reason says why
	// the first of them could not be placed (the rest fail alike, since
	// nothing changed in between).
	Unplaced int
	Reason   *Reason
}

// Place places n replicas of req on nodes, one by one, each counted before
// the next is placed. It reserves nothing: the caller commits each Choice
// with Check under the node's Generation. nodes is not modified. A caller
// placing many requests over the same nodes uses a Snapshot instead.
func Place(nodes []Node, req Request, n int) Result {
	return NewSnapshot(nodes).Place(req, n)
}

// Place is the package's Place over the snapshot's nodes.
func (s *Snapshot) Place(req Request, n int) Result {
	nodes := s.nodes
	if n <= 0 {
		return Result{}
	}
	if err := validShape(req); err != nil {
		return Result{Unplaced: n, Reason: &Reason{Class: Unsatisfiable, Nodes: len(nodes), Invalid: err.Error()}}
	}
	c := newCycle(s, &req)
	ss := c.scorers()
	var res Result
	for range n {
		c.prepare()
		best, bestScore := -1, 0.0
		for i := range nodes {
			if c.check(i).code != pass {
				continue
			}
			s := c.score(ss, i)
			if best < 0 || s > bestScore || (s == bestScore && nodes[i].Name < nodes[best].Name) {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			res.Unplaced = n - len(res.Placed)
			res.Reason = c.diagnose()
			return res
		}
		res.Placed = append(res.Placed, Choice{Node: nodes[best].Name, Generation: nodes[best].Generation})
		c.commit(best)
	}
	return res
}

// Check re-validates one placement at commit time, as Nomad's plan applier
// does: the node's state and schedulability, the policy's names and labels,
// the fit against the node's current reservations (no overcommit), and the
// hard affinity and anti-affinity rules against req.Existing, whose
// placements must carry their nodes' labels. It returns nil or the Reason
// the node was refused. Spread is not re-checked: its least loaded domain
// spans every node, and a service's placements have one writer (the lease
// holder), so no concurrent commit can change it.
func Check(node Node, req Request) error {
	if err := validShape(req); err != nil {
		return &Reason{Class: Unsatisfiable, Nodes: 1, Invalid: err.Error()}
	}
	c := newCycle(NewSnapshot([]Node{node}), &req)
	fs := c.filters[:0:0]
	for _, f := range c.filters {
		if _, spread := f.(spreadFilter); !spread {
			fs = append(fs, f)
		}
	}
	c.filters = fs
	c.prepare()
	if c.check(0).code == pass {
		return nil
	}
	return c.diagnose()
}

// validShape refuses negative and zero-size shapes: a replica that needs
// nothing would fit everywhere forever and is a mistake upstream (unless
// the request says it reserves nothing, and then a shape is one).
func validShape(req Request) error {
	s := req.Shape
	switch {
	case req.Shapeless && s != Resources{}:
		return fmt.Errorf("a shapeless request with shape %+v", s)
	case req.Shapeless:
		return nil
	case s.VCPUs < 0 || s.MemoryBytes < 0 || s.DiskBytes < 0:
		return fmt.Errorf("negative replica shape %+v", s)
	case s == Resources{}:
		return fmt.Errorf("zero-size replica (vCPUs, memory and disk are all 0)")
	}
	return nil
}
