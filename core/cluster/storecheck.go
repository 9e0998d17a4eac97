package cluster

import (
	"context"
	"fmt"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
)

// storeCheck is the check name of events about the cluster's own store.
const storeCheck = "cluster-store"

// ReportLostEvents says loudly that the store came back below the events
// the cluster had acknowledged to agents (which then removed them from
// their spools): an ERROR log, and a CRITICAL event of check cluster-store
// on the cluster through the pipeline, so that rules alert.
func (c *Cluster) ReportLostEvents(ctx context.Context, missing, acked, stored int64, markPath string) error {
	out := fmt.Sprintf("CRITICAL - the store lost up to %d events it had acknowledged to agents: it holds event sequence numbers up to %d, but %d had been acknowledged (recorded in %s). The store was damaged or replaced by an older copy (a lost or zeroed WAL, a restored backup); agents do not resend acknowledged results",
		missing, stored, acked, markPath)
	c.log.Error("the store lost events it had acknowledged to agents", "missing", missing,
		"acked_seq", acked, "stored_seq", stored, "mark", markPath,
		"what_to_do", "find out what damaged or replaced the store; events between those sequence numbers are gone unless a backup holds them")
	if err := c.raise(ctx, ingest.StoreLoss, ingest.Synthetic{Node: c.opts.Name, Check: storeCheck, Status: unyov1.CheckStatus_CHECK_STATUS_CRITICAL, Output: out}); err != nil {
		return fmt.Errorf("record the loss of acknowledged events as an event: %w", err)
	}
	return nil
}
