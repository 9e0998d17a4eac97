package cluster

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// livenessCheck is the check name of node liveness events.
const livenessCheck = "node-liveness"

// nodeWatch is what the liveness judge remembers about one node.
type nodeWatch struct {
	lastBeat  time.Time
	goodBeats int       // heartbeats seen since the node turned Stale or Down
	probedAt  time.Time // last direct probe of a Stale node
	probeOK   bool
}

// watchLiveness judges nodes every second on the lease holder: a node that
// misses heartbeats turns Stale and its agent is probed directly; it turns
// Down only when the probe fails too after the longer threshold; two good
// heartbeats make it Ready again. Every change is an event through the
// pipeline, so rules and alerts apply.
func (c *Cluster) watchLiveness(ctx context.Context) {
	// The probe goes only to the node's validated address (probeAddress),
	// never where a redirect points.
	hc := &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	watch := map[string]*nodeWatch{}
	every(ctx, time.Second, func(ctx context.Context) { c.judgeLiveness(ctx, hc, watch) })
}

func (c *Cluster) judgeLiveness(ctx context.Context, hc *http.Client, watch map[string]*nodeWatch) {
	nodes, err := c.store.ListNodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("listing nodes for liveness failed", "err", err)
		}
		return
	}
	now := time.Now()
	var events []*unyov1.Event
	for _, n := range nodes {
		w := watch[n.GetName()]
		if w == nil {
			w = &nodeWatch{}
			watch[n.GetName()] = w
		}
		beat := n.GetLastHeartbeat().AsTime()
		if beat.After(w.lastBeat) {
			if !w.lastBeat.IsZero() {
				w.goodBeats++
			}
			w.lastBeat = beat
		}
		silent := now.Sub(beat)
		state := n.GetState()
		next, level, why := state, unyov1.Level_LEVEL_UNSPECIFIED, ""
		switch state {
		case unyov1.NodeState_NODE_STATE_READY, unyov1.NodeState_NODE_STATE_UNSPECIFIED:
			if silent > c.opts.StaleAfter {
				next, level = unyov1.NodeState_NODE_STATE_STALE, unyov1.Level_LEVEL_WARNING
				why = fmt.Sprintf("no heartbeat for %s (stale after %s); probing the agent", silent.Round(time.Second), c.opts.StaleAfter)
				w.goodBeats = 0
			} else if state == unyov1.NodeState_NODE_STATE_UNSPECIFIED {
				next = unyov1.NodeState_NODE_STATE_READY
			}
		case unyov1.NodeState_NODE_STATE_STALE, unyov1.NodeState_NODE_STATE_DOWN:
			switch {
			case w.goodBeats >= 2:
				next, level = unyov1.NodeState_NODE_STATE_READY, unyov1.Level_LEVEL_SUCCESS
				why = "heartbeats resumed"
			case state == unyov1.NodeState_NODE_STATE_STALE && silent > c.opts.DownAfter:
				if now.Sub(w.probedAt) >= 5*time.Second {
					w.probeOK, w.probedAt = c.probe(ctx, hc, n), now
				}
				if !w.probeOK {
					next, level = unyov1.NodeState_NODE_STATE_DOWN, unyov1.Level_LEVEL_CRITICAL
					why = fmt.Sprintf("no heartbeat for %s and the agent's status endpoint %q does not answer", silent.Round(time.Second), n.GetAddress())
				}
			}
		}
		if next == state {
			continue
		}
		if err := c.store.SetNodeState(ctx, n.GetName(), next); err != nil {
			c.log.Warn("changing node state failed", "node", n.GetName(), "state", next, "err", err)
			continue
		}
		c.log.Info("node state changed", "node", n.GetName(), "from", state, "to", next, "why", why)
		if level != unyov1.Level_LEVEL_UNSPECIFIED {
			events = append(events, livenessEvent(c.opts.Name, n, level, fmt.Sprintf("node %s is %s: %s", n.GetName(), next.DisplayName(), why)))
		}
	}
	if len(events) > 0 {
		if _, err := c.store.AppendEvents(ctx, events); err != nil {
			c.log.Warn("recording node liveness events failed", "err", err)
		}
		c.wakePipeline()
	}
}

// probe asks a node's agent directly whether it is alive.
func (c *Cluster) probe(ctx context.Context, hc *http.Client, n *unyov1.Node) bool {
	if n.GetAddress() == "" {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.GetAddress()+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func livenessEvent(cluster string, n *unyov1.Node, level unyov1.Level, msg string) *unyov1.Event {
	now := timestamppb.Now()
	status := map[unyov1.Level]unyov1.CheckStatus{
		unyov1.Level_LEVEL_SUCCESS:  unyov1.CheckStatus_CHECK_STATUS_OK,
		unyov1.Level_LEVEL_WARNING:  unyov1.CheckStatus_CHECK_STATUS_WARNING,
		unyov1.Level_LEVEL_CRITICAL: unyov1.CheckStatus_CHECK_STATUS_CRITICAL,
	}[level]
	return &unyov1.Event{
		Id: uuid.Must(uuid.NewV7()).String(), Cluster: cluster, Node: n.GetName(), Check: livenessCheck,
		Level: level, Status: status, Output: msg, StartedAt: now, ReceivedAt: now,
		Duration: durationpb.New(0), Labels: n.GetLabels(),
	}
}
