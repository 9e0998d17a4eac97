package cluster

import (
	"context"
	"log/slog"
	"runtime/pprof"
	"sync"
	"time"
)

// A component is one of a replica's background loops, with a name that
// logs and profiles show. Each is its own type in its own file; the two
// lists below are everything a cluster replica runs in the background.
type component struct {
	name string
	runner
}

type runner interface{ Run(ctx context.Context) }

// loop makes a component of a function.
type loop func(ctx context.Context)

func (l loop) Run(ctx context.Context) { l(ctx) }

// replicaComponents run on every replica.
func (c *Cluster) replicaComponents() []component {
	comps := []component{
		// Any replica may come to hold the lease and run the actions
		// outbox, so every replica starts the action plugins.
		{"action-plugins", loop(func(ctx context.Context) { c.startPlugins(ctx); close(c.pluginsReady) })},
		{"heartbeats", c.beats},
		{"results-clock", &resultsClock{c: c}},
		{"controller-lease", loop(func(ctx context.Context) { c.lease.Run(ctx, c.controller) })},
		{"node-topology", &topologyRefresher{c: c}},
	}
	if c.opts.TelemetryWAL != nil {
		// Every replica takes telemetry, each into its own WAL.
		comps = append(comps, component{"telemetry-wal", walTrimmer{c}})
	}
	return comps
}

// controllerComponents run only on the replica holding the controller
// lease, and stop when it is lost.
func (c *Cluster) controllerComponents() []component {
	comps := []component{
		{"liveness", newLivenessMonitor(c)},
		{"freshness", newFreshnessMonitor(c)},
		{"metric-checks", newMetricRunner(c)},
		{"pipeline", loop(c.runPipeline)},
		{"actions-outbox", loop(c.runActionsOutbox)},
		{"history-retention", &historyPruner{store: c.store, keep: c.opts.HistoryPerCheck, log: c.log}},
		{"log-retention", c.newLogPruner()},
		{"peer-watch", newPeerWatcher(c)},
		{"node-stage", newNodeStage(c)},
		{"loadbalancers", newLBStage(c)},
		{"auto-nodes", newAutoNodes(c)},
		{"self-healing", newHealer(c)},
		{"compute-agents", computeAgents{c}},
	}
	if c.stats != nil {
		comps = append(comps, component{"statistics", c.stats})
	}
	return comps
}

// Run runs the replica's components until ctx ends, then stops the action
// plugins.
func (c *Cluster) Run(ctx context.Context) {
	defer c.closePlugins()
	runAll(ctx, c.log, "replica", c.replicaComponents())
}

// controller runs the components only one replica may run at a time.
func (c *Cluster) controller(ctx context.Context) {
	runAll(ctx, c.log, "controller", c.controllerComponents())
}

// runAll runs comps side by side until they all return.
func runAll(ctx context.Context, log *slog.Logger, what string, comps []component) {
	names := make([]string, len(comps))
	for i, cm := range comps {
		names[i] = cm.name
	}
	log.Info("starting the "+what+" components", "components", names)
	var wg sync.WaitGroup
	for _, cm := range comps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The label tells the components apart in CPU profiles.
			pprof.Do(ctx, pprof.Labels("component", cm.name), cm.Run)
			log.Debug("component stopped", "component", cm.name)
		}()
	}
	wg.Wait()
}

// every runs fn at once and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
