package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/host"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// Action plugin runs: each attempt is bounded by actionTimeout; a RETRYABLE
// outcome (or a plugin that is down, perhaps restarting) is tried again, up
// to actionAttempts times. The idempotency key is the job's (rule and event
// or group), so a job run again after a crash or a lease move is replayed
// by the plugin rather than executed twice. Plugins replay every outcome of
// a key, RETRYABLE ones too, so a retry after RETRYABLE sends the key with
// "/retry-<n>" appended; a retry because the plugin was down keeps the key.
const (
	actionTimeout      = time.Minute
	actionAttempts     = 3
	actionRetryDefault = time.Second
	// actionRetryMax caps a plugin's retry_after: the wait holds one of the
	// outbox's actionWorkers.
	actionRetryMax = 10 * time.Second
)

// ActionPluginCheck is the check of the event raised when an action plugin
// run failed for good.
const ActionPluginCheck = "action-plugin"

// startPlugins makes and starts the action plugin host, on every replica
// (any of them may come to hold the lease and run the outbox). A plugin
// that cannot start is logged and raised as an event; it stops nothing.
func (c *Cluster) startPlugins(ctx context.Context) {
	if len(c.opts.Plugins) == 0 {
		return
	}
	h, err := host.New(host.Config{
		Dirs: c.opts.PluginDirs, Plugins: c.opts.Plugins, HostVersion: c.opts.Version, DigestCache: c.opts.PluginDigestCache,
		PassEnv: c.opts.PluginEnv,
		Logger:  c.log, OnStateChange: func(sc host.StateChange) { c.pluginStateChanged(ctx, sc) },
	})
	if err != nil {
		c.log.Error("the action plugin host cannot run; plugin actions fail", "err", err)
		for _, pc := range c.opts.Plugins {
			c.pluginStateChanged(ctx, host.StateChange{Plugin: pc.ID(), From: host.StateStopped, To: host.StateFailed, Err: err, At: time.Now()})
		}
		return
	}
	c.pluginsMu.Lock()
	c.plugins = h
	c.pluginsMu.Unlock()
	if err := h.Start(ctx); err != nil {
		c.log.Error("some action plugins did not start", "err", err)
	}
}

func (c *Cluster) closePlugins() {
	c.pluginsMu.Lock()
	h := c.plugins
	c.pluginsMu.Unlock()
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		c.log.Error("stopping the action plugins failed", "err", err)
	}
}

// pluginStateChanged raises a supervisor state change as an event of check
// plugin-<kind>-<name> on the cluster, through the normal pipeline.
func (c *Cluster) pluginStateChanged(ctx context.Context, sc host.StateChange) {
	code, what, ok := sc.Health()
	if !ok {
		return
	}
	st := unyov1.CheckStatus(code)
	kind, name, _ := strings.Cut(sc.Plugin, "/")
	out := fmt.Sprintf("plugin %s %s on replica %s", sc.Plugin, what, c.opts.Replica)
	if sc.Err != nil {
		out += ": " + sc.Err.Error()
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.raise(actx, ingest.PluginState, ingest.Synthetic{Node: c.opts.Name, Check: "plugin-" + kind + "-" + name, Status: st, Output: out}); err != nil {
		c.log.Warn("recording a plugin state change as an event failed", "plugin", sc.Plugin, "err", err)
	}
}

// actionOutcome is one plugin action's final result.
type actionOutcome struct {
	ok       bool
	text     string
	duration time.Duration
}

// runAction runs an outbox job's action plugin, retrying RETRYABLE outcomes
// and unavailable plugins with the job's idempotency key.
func (c *Cluster) runAction(ctx context.Context, j store.PendingAction) actionOutcome {
	start := time.Now()
	id := "action/" + j.Plugin.GetName()
	select {
	case <-c.pluginsReady:
	case <-ctx.Done():
		return actionOutcome{text: "cancelled while the plugins were starting"}
	}
	c.pluginsMu.Lock()
	h := c.plugins
	c.pluginsMu.Unlock()
	if h == nil {
		return actionOutcome{text: fmt.Sprintf("plugin %s is not enabled on this cluster (cluster.plugins.enabled)", id)}
	}
	p, err := h.Plugin("action", j.Plugin.GetName())
	if err != nil {
		return actionOutcome{text: fmt.Sprintf("plugin %s is not enabled on this cluster (cluster.plugins.enabled)", id)}
	}
	req := &pluginv1.ExecuteRequest{IdempotencyKey: j.Key, Timeout: durationpb.New(actionTimeout), Params: j.Plugin.GetConfig(), Payload: j.Body}
	var last string
	retries := 0
	for attempt := 1; ; attempt++ {
		req.IdempotencyKey = j.Key
		if retries > 0 {
			req.IdempotencyKey = fmt.Sprintf("%s/retry-%d", j.Key, retries)
		}
		out, err := executeOnce(ctx, p, req)
		retry := actionRetryDefault
		switch {
		case err != nil && ctx.Err() != nil:
			return actionOutcome{text: "cancelled: " + err.Error()}
		case err != nil && errors.Is(err, host.ErrUnavailable):
			last = err.Error()
		case err != nil:
			return actionOutcome{text: err.Error(), duration: time.Since(start)}
		case out.GetStatus() == pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED, out.GetStatus() == pluginv1.OutcomeStatus_OUTCOME_STATUS_SKIPPED:
			return actionOutcome{ok: true, text: describeOutcome(out, attempt), duration: time.Since(start)}
		case out.GetStatus() == pluginv1.OutcomeStatus_OUTCOME_STATUS_RETRYABLE:
			last = describeOutcome(out, attempt)
			retries++
			if ra := out.GetRetryAfter(); ra != nil && ra.AsDuration() > 0 {
				retry = min(ra.AsDuration(), actionRetryMax)
			}
		default:
			return actionOutcome{text: describeOutcome(out, attempt), duration: time.Since(start)}
		}
		if attempt >= actionAttempts {
			return actionOutcome{text: fmt.Sprintf("gave up after %d attempts: %s", attempt, last), duration: time.Since(start)}
		}
		select {
		case <-ctx.Done():
			return actionOutcome{text: "cancelled: " + last}
		case <-time.After(retry):
		}
	}
}

func describeOutcome(o *pluginv1.Outcome, attempt int) string {
	s := strings.TrimPrefix(o.GetStatus().String(), "OUTCOME_STATUS_")
	if m := o.GetMessage(); m != "" {
		s += ": " + m
	}
	if o.GetReplayed() {
		s += " (replayed)"
	}
	if attempt > 1 {
		s += fmt.Sprintf(" (attempt %d)", attempt)
	}
	return s
}

// executeOnce runs Execute and reads its stream up to the one outcome.
func executeOnce(ctx context.Context, p *host.Plugin, req *pluginv1.ExecuteRequest) (*pluginv1.Outcome, error) {
	var out *pluginv1.Outcome
	err := p.Do(ctx, func(ctx context.Context, conn *base.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, actionTimeout+5*time.Second)
		defer cancel()
		stream, err := conn.Action.Execute(ctx, req)
		if err != nil {
			return err
		}
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return errors.New("the plugin ended the call without an outcome")
			}
			if err != nil {
				return err
			}
			if o := r.GetOutcome(); o != nil {
				out = o
				return nil
			}
		}
	})
	return out, err
}

// pluginStatus is this replica's action plugins' state, for GetStatus.
func (c *Cluster) pluginStatus() []*unyov1.PluginStatus {
	c.pluginsMu.Lock()
	h := c.plugins
	c.pluginsMu.Unlock()
	if h == nil {
		return nil
	}
	return convert.PluginStatuses(h.Status())
}
