package cluster

import (
	"context"
	"fmt"
)

// computeOf says whether node may speak for compute: an agent inside the
// compute reaches the cluster only through its node's agent (the proxy on
// 169.254.1.2), which forwards with the node's own credential and names
// the compute; the compute must be assigned to that node (its current or
// next instance, not one being removed).
func (c *Cluster) computeOf(ctx context.Context, node, compute string) error {
	as, _, err := c.store.ListAssignments(ctx, node)
	if err != nil {
		return fmt.Errorf("the assignments of node %q: %w", node, err)
	}
	for _, a := range as {
		if a.GetCompute() == compute && a.GetDesired() != StateDeleted && a.GetLoadbalancer() == nil {
			return nil
		}
	}
	return fmt.Errorf("compute %q is not assigned to node %q", compute, node)
}
