package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/topology"
)

// nodeWatch is what the liveness judge remembers about one node.
type nodeWatch struct {
	lastBeat  time.Time
	goodBeats int       // heartbeats seen since the node turned Stale or Down
	probedAt  time.Time // last direct probe of a Stale node
	probeOK   bool
}

// livenessMonitor judges nodes every second on the lease holder: a node
// that misses heartbeats turns Stale and its agent is probed directly; it
// turns Down only when the probe fails too after the longer threshold; two
// good heartbeats make it Ready again. Every change is an event through
// ingest and the pipeline, so rules and alerts apply.
//
// A monitor starts when its replica takes the controller lease: when the
// cluster starts, or when another replica takes over. Heartbeats sent
// while no replica was listening never arrived, so silence is counted from
// the later of a node's last heartbeat and the monitor's start, plus the
// time agents may take to come back (countFrom), as Nomad gives nodes a
// grace period after a leader change: a restart of the cluster makes no
// node Stale, and a node that really is gone turns Stale stale_after after
// that.
type livenessMonitor struct {
	store store.Store
	// beats is this replica's heartbeat tracker, whose beats are newer
	// than the store's (it writes them lazily).
	beats                 *heartbeats
	ingest                *ingest.Ingester
	staleAfter, downAfter time.Duration
	// now is the wall clock, which heartbeats are stamped with.
	now func() time.Time
	// started is when the monitor started judging; from is when it counts
	// silence from (countFrom), set at the first judgement.
	started, from time.Time
	log           *slog.Logger
	hc            *http.Client
	// watch is what the monitor remembers about each node.
	watch map[string]*nodeWatch
}

func newLivenessMonitor(c *Cluster) *livenessMonitor {
	return &livenessMonitor{
		store: c.store, beats: c.beats, ingest: c.ingest, staleAfter: c.opts.StaleAfter, downAfter: c.opts.DownAfter,
		now: time.Now, started: time.Now(), log: c.log,
		// The probe goes only to the node's validated address (probeAddress),
		// never where a redirect points.
		hc:    &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		watch: map[string]*nodeWatch{},
	}
}

// Run judges the nodes every second until ctx ends.
func (l *livenessMonitor) Run(ctx context.Context) { every(ctx, time.Second, l.judge) }

// judge reads only the nodes' liveness columns: at 50,000 nodes, decoding
// every node's description each second was most of an idle cluster's CPU.
// A node's description is read only when it changes state. After the first
// judgement it reads only the nodes that may change state: those not Ready,
// and Ready ones silent for longer than stale_after (a Ready node heard
// from since stays Ready). What it remembers of other nodes is forgotten,
// which is safe: only a node that is not Ready needs its memory.
func (l *livenessMonitor) judge(ctx context.Context) {
	now := l.now()
	var lateBefore time.Time
	if !l.from.IsZero() {
		lateBefore = now.Add(-l.staleAfter)
	}
	nodes, err := l.store.ListNodeBeats(ctx, lateBefore)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("listing nodes for liveness failed", "err", err)
		}
		return
	}
	if l.from.IsZero() {
		beats := make([]time.Time, len(nodes))
		for i, n := range nodes {
			beats[i] = n.LastHeartbeat
		}
		l.from = countFrom(l.started, beats)
	}
	var events []*unyov1.Event
	// Forget deleted nodes, and Ready ones heard from.
	listed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		listed[n.Name] = true
	}
	maps.DeleteFunc(l.watch, func(name string, _ *nodeWatch) bool { return !listed[name] })
	for _, n := range nodes {
		w := l.watch[n.Name]
		if w == nil {
			w = &nodeWatch{}
			l.watch[n.Name] = w
		}
		// The newer of the store's beat (written by any replica, lazily)
		// and this replica's own.
		beat := latest(beatTime(n), l.beats.lastBeat(n.Name))
		if beat.After(w.lastBeat) {
			if !w.lastBeat.IsZero() {
				w.goodBeats++
			}
			w.lastBeat = beat
		}
		// silent is what the node's events say; counted is what is judged:
		// silence while no monitor was listening does not count.
		silent, counted := now.Sub(beat), now.Sub(latest(beat, l.from))
		state := n.State
		// The node's description, read once it is needed: for the probe's
		// address and the labels of a liveness event.
		var desc *unyov1.Node
		describe := func() *unyov1.Node {
			if desc == nil {
				var err error
				if desc, err = l.store.GetNode(ctx, n.Name); err != nil {
					l.log.Warn("reading a node for its liveness failed", "node", n.Name, "err", err)
					desc = &unyov1.Node{Name: n.Name}
				}
			}
			return desc
		}
		// A change to Stale, Down or back to Ready raises an event of status.
		next, raise, status, why := state, false, unyov1.CheckStatus_CHECK_STATUS_OK, ""
		switch state {
		case unyov1.NodeState_NODE_STATE_READY, unyov1.NodeState_NODE_STATE_UNSPECIFIED:
			if counted > l.staleAfter {
				next, raise, status = unyov1.NodeState_NODE_STATE_STALE, true, unyov1.CheckStatus_CHECK_STATUS_WARNING
				why = fmt.Sprintf("no heartbeat for %s (stale after %s); probing the agent", silent.Round(time.Second), l.staleAfter)
				w.goodBeats = 0
			} else if state == unyov1.NodeState_NODE_STATE_UNSPECIFIED {
				next = unyov1.NodeState_NODE_STATE_READY
			}
		case unyov1.NodeState_NODE_STATE_STALE, unyov1.NodeState_NODE_STATE_DOWN:
			switch {
			case w.goodBeats >= 2:
				next, raise, status = unyov1.NodeState_NODE_STATE_READY, true, unyov1.CheckStatus_CHECK_STATUS_OK
				why = "heartbeats resumed"
			case state == unyov1.NodeState_NODE_STATE_STALE && counted > l.downAfter:
				if now.Sub(w.probedAt) >= 5*time.Second {
					w.probeOK, w.probedAt = l.probe(ctx, describe()), now
				}
				if !w.probeOK {
					next, raise, status = unyov1.NodeState_NODE_STATE_DOWN, true, unyov1.CheckStatus_CHECK_STATUS_CRITICAL
					why = fmt.Sprintf("no heartbeat for %s and the agent's status endpoint %q does not answer", silent.Round(time.Second), describe().GetAddress())
				}
			}
		}
		if next == state {
			continue
		}
		if err := l.store.SetNodeState(ctx, n.Name, next); err != nil {
			l.log.Warn("changing node state failed", "node", n.Name, "state", next, "err", err)
			continue
		}
		l.log.Info("node state changed", "node", n.Name, "from", state, "to", next, "why", why)
		if raise {
			events = append(events, ingest.Synthetic{
				Node: n.Name, Check: ingest.LivenessCheck, Status: status, At: now, Labels: topology.NodeLabels(describe()),
				Output: fmt.Sprintf("node %s is %s: %s", n.Name, next.DisplayName(), why),
			}.Event())
		}
	}
	if len(events) > 0 {
		if _, err := l.ingest.Ingest(ctx, ingest.Batch{Source: ingest.Liveness, Events: events}); err != nil {
			l.log.Warn("recording node liveness events failed", "err", err)
		}
	}
}

// probe asks a node's agent directly whether it is alive.
func (l *livenessMonitor) probe(ctx context.Context, n *unyov1.Node) bool {
	if n.GetAddress() == "" {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.GetAddress()+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// countFrom is when a judge of silence that started at started counts
// from, given the nodes it found. Until started no judge listened: since
// the newest heartbeat stored, if the cluster was down. Agents back off
// while their cluster does not answer, up to limits.MaxHeartbeatRetry
// between attempts, so each may take about as long as the cluster was away
// (at most that) to come back; the count starts after that allowance.
// beats are the nodes' last heartbeats, zero for none yet.
func countFrom(started time.Time, beats []time.Time) time.Time {
	var newest time.Time
	for _, b := range beats {
		newest = latest(newest, b)
	}
	if newest.IsZero() {
		return started // no heartbeat yet: no agent to wait for
	}
	away := max(started.Sub(newest), 0)
	return started.Add(min(away, limits.MaxHeartbeatRetry))
}

// beatTime is a node's last heartbeat as the judge counts it: the Unix
// epoch before the first, so that a node never heard from counts as
// silent since then, as a missing timestamp reads.
func beatTime(n store.NodeBeat) time.Time {
	if n.LastHeartbeat.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return n.LastHeartbeat
}

// latest returns the later of two times.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
