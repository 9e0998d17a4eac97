package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/provision/topology"
)

// metricRunner evaluates the cluster's metric checks on the lease holder.
// Pending (`for`) state lives only in its memory: a failover or restart
// starts every `for` timer again, which can delay an alert by up to `for`
// but never raises one early.
type metricRunner struct {
	cluster   string // the synthetic node of results about no data
	store     store.Store
	metrics   tsdb.Store // nil: the cluster keeps no metrics
	revisions *revisionCache
	ingest    *ingest.Ingester
	log       *slog.Logger

	rev    int64
	loaded bool
	defs   []checks.Definition
	next   map[string]time.Time // check -> when it is due
	hash   map[string]string    // check -> SpecHash its state belongs to
	// state is per check and node (series); the synthetic no-data node is
	// the cluster's name.
	state map[string]map[string]*checks.Pending
}

func newMetricRunner(c *Cluster) *metricRunner {
	return &metricRunner{
		cluster: c.opts.Name, store: c.store, metrics: c.opts.Metrics, revisions: &c.revisions, ingest: c.ingest, log: c.log,
		next: map[string]time.Time{}, hash: map[string]string{}, state: map[string]map[string]*checks.Pending{},
	}
}

// Run evaluates the due checks every second until ctx ends.
func (r *metricRunner) Run(ctx context.Context) {
	every(ctx, time.Second, func(ctx context.Context) { _ = r.tick(ctx, time.Now()) })
}

// tick evaluates the checks due at now (each first at once, then every
// interval), stores their results as events and returns them.
func (r *metricRunner) tick(ctx context.Context, now time.Time) []*unyov1.Event {
	if err := r.load(ctx); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("loading metric checks failed", "err", err)
		}
		return nil
	}
	var due []checks.Definition
	for _, d := range r.defs {
		if !now.Before(r.next[d.Name]) {
			r.next[d.Name] = now.Add(d.Interval)
			due = append(due, d)
		}
	}
	if len(due) == 0 {
		return nil
	}
	nodes := map[string]*unyov1.Node{}
	if list, err := r.store.ListNodes(ctx); err == nil {
		for _, n := range list {
			nodes[n.GetName()] = n
		}
	}
	var events []*unyov1.Event
	for _, d := range due {
		events = append(events, r.evaluate(ctx, d, now, nodes)...)
	}
	res, err := r.ingest.Ingest(ctx, ingest.Batch{Source: ingest.MetricCheck, Events: events})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("recording metric check results failed", "events", len(events), "err", err)
		}
		return nil
	}
	return res.Kept
}

// load re-reads the checks when their revision moved, and forgets the state
// of checks that were deleted or changed.
func (r *metricRunner) load(ctx context.Context) error {
	rev, err := r.revisions.get(ctx)
	if err != nil {
		return err
	}
	if r.loaded && rev == r.rev {
		return nil
	}
	all, err := r.store.ListChecks(ctx)
	if err != nil {
		return err
	}
	r.defs = r.defs[:0]
	keep := map[string]bool{}
	for _, ch := range all {
		d, err := checks.Compile(ch)
		if err != nil || d.Metric == nil {
			continue // GetChecks already logs invalid stored checks
		}
		r.defs = append(r.defs, d)
		if h := d.SpecHash(); r.hash[d.Name] != h {
			r.hash[d.Name] = h
			delete(r.state, d.Name)
			delete(r.next, d.Name)
		}
		keep[d.Name] = true
	}
	for name := range r.hash {
		if !keep[name] {
			delete(r.hash, name)
			delete(r.state, name)
			delete(r.next, name)
		}
	}
	r.rev, r.loaded = rev, true
	return nil
}

// metricResult is one series' judgement before `for` applies.
type metricResult struct {
	node   string
	raw    unyov1.CheckStatus
	text   string
	perf   *unyov1.PerfData
	labels map[string]string
}

// evaluate queries one check at now and returns an event per series, or one
// for the synthetic node (the cluster's name) when there is no data.
func (r *metricRunner) evaluate(ctx context.Context, d checks.Definition, now time.Time, nodes map[string]*unyov1.Node) []*unyov1.Event {
	m := d.Metric
	results := r.query(ctx, d, now)
	st := r.state[d.Name]
	if st == nil {
		st = map[string]*checks.Pending{}
		r.state[d.Name] = st
	}
	seen := make(map[string]bool, len(results))
	for _, res := range results {
		seen[res.node] = true
	}
	synthetic := r.cluster
	if _, ok := st[synthetic]; ok && !seen[synthetic] {
		// Data came back: clear what the no-data result raised.
		results = append(results, metricResult{node: synthetic, raw: unyov1.CheckStatus_CHECK_STATUS_OK, text: fmt.Sprintf("data again: %d series", len(results))})
	}
	// A series that is no longer returned is forgotten; its last result stays.
	for node := range st {
		if !seen[node] {
			delete(st, node)
		}
	}
	events := make([]*unyov1.Event, 0, len(results))
	for _, res := range results {
		p := st[res.node]
		if p == nil {
			p = &checks.Pending{}
			if seen[res.node] {
				st[res.node] = p
			}
		}
		status, held := p.Step(res.raw, now, m.For)
		out := res.text
		if status != res.raw {
			out += fmt.Sprintf("; pending for %s of %s", held.Round(time.Second), m.For)
		}
		// The check's labels, the series', then the node's.
		labels := maps.Clone(d.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, res.labels)
		if n := nodes[res.node]; n != nil {
			maps.Copy(labels, topology.NodeLabels(n))
		}
		if len(labels) == 0 {
			labels = nil
		}
		e := ingest.Synthetic{
			Node: res.node, Check: d.Name, Status: status, UnknownLevel: d.UnknownLevel, Output: out, At: now, Labels: labels,
		}.Event()
		e.Occurrences, e.Reissue = int32(d.Occurrences), durationpb.New(d.Reissue)
		if res.perf != nil {
			e.Perfdata = []*unyov1.PerfData{res.perf}
		}
		events = append(events, e)
	}
	return events
}

func (r *metricRunner) query(ctx context.Context, d checks.Definition, now time.Time) []metricResult {
	m := d.Metric
	synthetic := r.cluster
	db := r.metrics
	if db == nil {
		return []metricResult{{node: synthetic, raw: unyov1.CheckStatus_CHECK_STATUS_UNKNOWN,
			text: fmt.Sprintf("cluster %q keeps no metrics (metrics.store is none), so %s cannot be evaluated", synthetic, m.Expr)}}
	}
	qctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	series, err := db.Query(qctx, m.Expr, now)
	switch {
	case err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return nil // stopping
	case err != nil:
		return []metricResult{{node: synthetic, raw: unyov1.CheckStatus_CHECK_STATUS_UNKNOWN, text: fmt.Sprintf("query %s failed: %v", m.Expr, err)}}
	case len(series) == 0:
		return []metricResult{{node: synthetic, raw: m.NoData, text: fmt.Sprintf("no data: %s returned no series", m.Expr)}}
	}
	out := make([]metricResult, 0, len(series))
	for _, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		v := s.Points[len(s.Points)-1].V
		name := s.Labels["__name__"]
		if name == "" {
			name = m.Expr
		}
		raw, text := m.Judge(name, v)
		labels := maps.Clone(s.Labels)
		delete(labels, "__name__")
		perf := &unyov1.PerfData{Label: name, Value: v}
		if m.Warning != nil {
			perf.Warn = m.Warning.String()
		}
		if m.Critical != nil {
			perf.Crit = m.Critical.String()
		}
		out = append(out, metricResult{node: seriesNode(labels, synthetic), raw: raw, text: text, perf: perf, labels: labels})
	}
	return out
}

// seriesNode names the "node" a series is reported as: its node label, with
// any other labels appended as {k=v,...} so that series of one node stay
// apart; a series without a node label is named by its labels alone, and
// one without labels (sum(...)) by the cluster.
//
// The instance and job the cluster gives an agent's series (instance the
// node's name) say nothing the node label does not, and are left out.
func seriesNode(labels map[string]string, cluster string) string {
	node, ok := labels["node"]
	agents := ok && labels[instanceLabel] == node
	var rest []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k == "node" || (agents && (k == instanceLabel || k == jobLabel && (labels[k] == "node" || labels[k] == "unyo"))) {
			continue
		}
		rest = append(rest, k+"="+labels[k])
	}
	switch {
	case ok && len(rest) == 0:
		return node
	case ok:
		return node + "{" + strings.Join(rest, ",") + "}"
	case len(rest) > 0:
		return strings.Join(rest, ",")
	}
	return cluster
}
