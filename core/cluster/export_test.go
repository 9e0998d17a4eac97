package cluster

import (
	"context"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// NewMetricTicker returns the metric checks' evaluation as the controller
// runs it, for tests to drive at times they choose.
func NewMetricTicker(c *Cluster) func(ctx context.Context, at time.Time) []*unyov1.Event {
	return newMetricRunner(c).tick
}
