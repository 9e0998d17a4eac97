package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
	"github.com/unyo-ops/unyo/provision/topology"
)

// freshnessMonitor raises an event when a check with spec.ttl stops
// reporting from a node (Sensu's check TTL): the results stopped, and
// the last one, maybe OK, no longer says anything.
//
// The event is the check's own (same node and check), so it replaces the
// stale result in `events ls`, the rules that alert on the check apply to
// it, and the next real result clears it. Its status is UNKNOWN — nobody
// knows how the check would fare — so its level follows the check's
// unknown_level (critical by default). It is raised once per silence: not
// again until a result of the check arrived.
//
// Only Ready nodes that the check still selects are judged: a Stale or
// Down node has its node-liveness event, which speaks for all its checks,
// and a node the check no longer selects is not expected to run it. Like
// node liveness, silence while no monitor was listening (the cluster was
// down, or another replica held the lease, and the time agents take to
// come back after that: countFrom) does not count.
type freshnessMonitor struct {
	store  store.Store
	ingest *ingest.Ingester
	now    func() time.Time
	// started is when the monitor started judging; from is when it counts
	// silence from (countFrom), set at the first judgement.
	started, from time.Time
	log           *slog.Logger
	// raised holds the id of the freshness event raised for a node/check:
	// while it is the latest event there, nothing new arrived.
	raised map[pipeline.NodeCheck]string
	// defs are the checks with a ttl, compiled at rev.
	defs []checks.Definition
	rev  int64
}

func newFreshnessMonitor(c *Cluster) *freshnessMonitor {
	return &freshnessMonitor{store: c.store, ingest: c.ingest, now: time.Now, started: time.Now(), log: c.log,
		raised: map[pipeline.NodeCheck]string{}, rev: -1}
}

// Run judges freshness every second until ctx ends.
func (m *freshnessMonitor) Run(ctx context.Context) { every(ctx, time.Second, m.judge) }

// load refreshes the checks with a ttl when the checks changed.
func (m *freshnessMonitor) load(ctx context.Context) error {
	rev, err := m.store.ChecksRevision(ctx)
	if err != nil || rev == m.rev {
		return err
	}
	all, err := m.store.ListChecks(ctx)
	if err != nil {
		return err
	}
	m.defs = m.defs[:0]
	for _, ch := range all {
		if d, err := checks.Compile(ch); err == nil && d.TTL > 0 {
			m.defs = append(m.defs, d)
		}
	}
	m.rev = rev
	return nil
}

func (m *freshnessMonitor) judge(ctx context.Context) {
	if err := m.load(ctx); err != nil {
		if ctx.Err() == nil {
			m.log.Warn("reading checks for freshness failed", "err", err)
		}
		return
	}
	if len(m.defs) == 0 {
		return
	}
	nodes, err := m.store.ListNodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("listing nodes for freshness failed", "err", err)
		}
		return
	}
	if m.from.IsZero() {
		beats := make([]time.Time, 0, len(nodes))
		for _, n := range nodes {
			if hb := n.GetLastHeartbeat(); hb != nil {
				beats = append(beats, hb.AsTime())
			}
		}
		m.from = countFrom(m.started, beats)
	}
	ready := make(map[string]*unyov1.Node, len(nodes))
	for _, n := range nodes {
		if n.GetState() == unyov1.NodeState_NODE_STATE_READY {
			ready[n.GetName()] = n
		}
	}
	now := m.now()
	var events []*unyov1.Event
	var keys []pipeline.NodeCheck
	// still is what raised keeps: the silences that go on.
	still := make(map[pipeline.NodeCheck]string, len(m.raised))
	for _, d := range m.defs {
		// The latest result of the check on every node (up to the list
		// limit, 10000 nodes a check).
		results, err := m.store.ListEvents(ctx, store.EventFilter{Check: d.Name, Limit: 10000})
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("reading latest events for freshness failed", "check", d.Name, "err", err)
			}
			return
		}
		for _, e := range results {
			nc := pipeline.NodeCheck{Node: e.GetNode(), Check: d.Name}
			if id, ok := m.raised[nc]; ok && id == e.GetId() {
				still[nc] = id
				continue
			}
			n := ready[nc.Node]
			if n == nil || !d.Selects(topology.NodeLabels(n)) {
				continue
			}
			last := e.GetReceivedAt().AsTime()
			if now.Sub(latest(last, m.from)) <= d.TTL {
				continue
			}
			ev := ingest.Synthetic{
				Node: nc.Node, Check: d.Name, Status: unyov1.CheckStatus_CHECK_STATUS_UNKNOWN, UnknownLevel: d.UnknownLevel,
				At: now, Labels: topology.NodeLabels(n),
				Output: fmt.Sprintf("no result of check %s from node %s for %s (ttl %s); the last one was %s: %s",
					d.Name, nc.Node, now.Sub(last).Round(time.Second), d.TTL, e.GetStatus().Name(), e.GetOutput()),
			}.Event()
			events, keys = append(events, ev), append(keys, nc)
		}
	}
	m.raised = still
	if len(events) == 0 {
		return
	}
	if _, err := m.ingest.Ingest(ctx, ingest.Batch{Source: ingest.Freshness, Events: events}); err != nil {
		m.log.Warn("recording freshness events failed; will retry", "err", err)
		return
	}
	for i, nc := range keys {
		m.raised[nc] = events[i].GetId()
		m.log.Info("check result overdue", "node", nc.Node, "check", nc.Check)
	}
}
