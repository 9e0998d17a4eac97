package cluster

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules/apihook"
)

// actionWorkers bounds outbox jobs in flight, so a slow receiver or plugin
// cannot hold up every other action.
const actionWorkers = 8

// runActionsOutbox runs the api_hook deliveries and action plugin runs the
// pipeline committed to the actions outbox. A job leaves the outbox only
// when it finished, so a crash means it runs again: at least once, with its
// idempotency key.
func (c *Cluster) runActionsOutbox(ctx context.Context) {
	hc := apihook.NewClient(c.opts.HookPolicy)
	inFlight := map[string]bool{}
	done := make(chan string, actionWorkers)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if len(inFlight) < actionWorkers {
			jobs, err := c.store.DueActions(ctx, 4*actionWorkers)
			if err != nil && ctx.Err() == nil {
				c.log.Warn("reading the actions outbox failed", "err", err)
			}
			for _, j := range jobs {
				if inFlight[j.Key] || len(inFlight) >= actionWorkers {
					continue
				}
				inFlight[j.Key] = true
				go func() {
					c.deliver(ctx, hc, j)
					done <- j.Key
				}()
			}
		}
		select {
		case <-ctx.Done():
			for len(inFlight) > 0 { // let deliveries see the cancellation and return
				delete(inFlight, <-done)
			}
			return
		case k := <-done:
			delete(inFlight, k)
		case <-tick.C:
		}
	}
}

func (c *Cluster) deliver(ctx context.Context, hc *http.Client, j store.PendingAction) {
	if j.Plugin != nil {
		c.deliverPlugin(ctx, j)
		return
	}
	cfg, err := hookFromProto(j.Hook)
	var out apihook.Outcome
	if err == nil {
		out = apihook.SendBody(ctx, hc, cfg, j.Key, j.Body)
	} else {
		out = apihook.Outcome{Err: err}
	}
	if ctx.Err() != nil {
		return // stopping, or the lease moved: the next holder delivers it
	}
	// The URL as messages show it: its password and query (which often
	// carry a token) do not belong in events that every viewer reads.
	target := apihook.Redact(cfg.URL)
	s := &unyov1.ExplanationStep{Stage: "action", Rule: j.Rule, At: timestamppb.Now(), Outcome: "api_hook to " + target + ": " + out.String()}
	if err := c.store.FinishAction(ctx, j.Key, s); err != nil {
		c.log.Warn("recording a hook delivery failed; it will be delivered again", "key", j.Key, "err", err)
		return
	}
	if out.Succeeded {
		c.count(`unyo_actions_total{kind="api_hook",outcome="delivered"}`, 1)
		return
	}
	c.count(`unyo_actions_total{kind="api_hook",outcome="failed"}`, 1)
	c.log.Warn("api_hook delivery failed for good", "rule", j.Rule, "url", target, "outcome", out.String())
	// A final failure is an event like any other, so rules can alert on it.
	node := c.opts.Name
	if e, err := c.store.GetEvent(ctx, j.EventID); err == nil {
		node = e.GetNode()
	}
	if err := c.raise(ctx, ingest.ActionFailure, ingest.Synthetic{Node: node, Check: "api-hook", Status: unyov1.CheckStatus_CHECK_STATUS_CRITICAL,
		Output: fmt.Sprintf("api_hook of rule %s to %s failed: %s", j.Rule, target, out.String()), Duration: out.Duration}); err != nil {
		c.log.Warn("recording the hook failure as an event failed", "err", err)
	}
}

func hookFromProto(h *unyov1.ApiHookAction) (apihook.Config, error) {
	cfg := apihook.Config{URL: h.GetUrl(), Format: h.GetFormat(), Retries: int(h.GetRetries()), Headers: h.GetHeaders()}
	if h.GetTimeout() != "" {
		d, err := time.ParseDuration(h.GetTimeout())
		if err != nil {
			return cfg, fmt.Errorf("timeout %q: %w", h.GetTimeout(), err)
		}
		cfg.Timeout = d
	}
	return cfg, nil
}

// deliverPlugin runs an outbox job's action plugin, records the outcome in
// the event's explanation and raises a final failure as an event.
func (c *Cluster) deliverPlugin(ctx context.Context, j store.PendingAction) {
	out := c.runAction(ctx, j)
	if ctx.Err() != nil {
		return // stopping, or the lease moved: the next holder runs it (same key)
	}
	id := "action/" + j.Plugin.GetName()
	s := &unyov1.ExplanationStep{Stage: "action", Rule: j.Rule, At: timestamppb.Now(), Outcome: "plugin " + id + ": " + out.text}
	if err := c.store.FinishAction(ctx, j.Key, s); err != nil {
		c.log.Warn("recording a plugin action failed; it will run again", "key", j.Key, "err", err)
		return
	}
	if out.ok {
		c.count(`unyo_actions_total{kind="plugin",outcome="delivered"}`, 1)
		return
	}
	c.count(`unyo_actions_total{kind="plugin",outcome="failed"}`, 1)
	c.log.Warn("plugin action failed for good", "rule", j.Rule, "plugin", id, "outcome", out.text)
	node := c.opts.Name
	if e, err := c.store.GetEvent(ctx, j.EventID); err == nil {
		node = e.GetNode()
	}
	if err := c.raise(ctx, ingest.ActionFailure, ingest.Synthetic{Node: node, Check: ActionPluginCheck, Status: unyov1.CheckStatus_CHECK_STATUS_CRITICAL,
		Output: fmt.Sprintf("plugin action of rule %s (plugin %s) failed: %s", j.Rule, id, out.text), Duration: out.duration}); err != nil {
		c.log.Warn("recording the plugin action failure as an event failed", "err", err)
	}
}
