package cluster

import (
	"context"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
)

// raise stores one event the cluster makes itself through the one ingest
// path, like an agent's result: stamped, validated, Filter rules, stored,
// the pipeline woken.
func (c *Cluster) raise(ctx context.Context, src ingest.Source, s ingest.Synthetic) error {
	if s.At.IsZero() {
		s.At = time.Now()
	}
	_, err := c.ingest.Ingest(ctx, ingest.Batch{Source: src, Events: []*unyov1.Event{s.Event()}})
	return err
}
