package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
	"github.com/unyo-ops/unyo/maintenance"
)

// pipelineBatch bounds the events one commit processes.
const pipelineBatch = 1000

// pipelineRunner runs stored events through the stages of
// eventrules/pipeline on the replica holding the controller lease. The
// stages' state lives in memory while it runs and is written with the
// cursor in one transaction per batch, so a replica taking over resumes
// exactly where the last commit left off: no event is processed twice and
// none is skipped.
type pipelineRunner struct {
	c        *Cluster
	stages   *pipeline.Pipeline
	state    *pipeline.State
	cursor   int64
	rulesRev int64
	loaded   bool
	// forgetRev is the store's forget revision the state was loaded at.
	forgetRev int64
}

// errForgotten stops a runner whose state holds what a deleted node or
// check left: the next one loads the committed state, which has it no
// more.
var errForgotten = errors.New("a node or check was deleted")

// runPipeline processes events until ctx ends or the lease is lost.
func (c *Cluster) runPipeline(ctx context.Context) {
	for ctx.Err() == nil {
		p := &pipelineRunner{c: c, stages: pipeline.New()}
		err := p.run(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrConflict) {
			c.log.Warn("another replica processed events; stopping the pipeline here", "err", err)
			return
		}
		if errors.Is(err, errForgotten) {
			c.log.Info("a node or check was deleted; the event pipeline reloads its state")
			continue
		}
		// Any other failure (the database went away): start over from the
		// committed state, so nothing half-applied in memory survives.
		c.log.Warn("event pipeline failed; restarting from the last commit", "err", err)
		if !ctxwait.Sleep(ctx, time.Second) {
			return
		}
	}
}

func (p *pipelineRunner) run(ctx context.Context) error {
	// Read before the state, so a forget committed in between is seen as
	// a move.
	forgetRev, err := p.c.store.ForgetRevision(ctx)
	if err != nil {
		return fmt.Errorf("read the forget revision: %w", err)
	}
	p.forgetRev = forgetRev
	st, err := p.c.store.LoadPipeline(ctx)
	if err != nil {
		return fmt.Errorf("load pipeline state: %w", err)
	}
	p.cursor = st.Cursor
	p.state = pipeline.NewState()
	p.state.Cluster = p.c.opts.Name
	p.state.Counters, p.state.Issued = st.Counters, st.Issued
	p.state.SetGroups(st.Groups)
	if st.Notified != nil {
		p.state.Notified = st.Notified
	}
	p.c.log.Info("event pipeline running", "cursor", st.Cursor, "open_groups", len(p.state.Groups))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	if err := p.loadRules(ctx); err != nil {
		return err
	}
	for {
		if rev, err := p.c.store.ForgetRevision(ctx); err != nil {
			return fmt.Errorf("read the forget revision: %w", err)
		} else if rev != p.forgetRev {
			return errForgotten
		}
		if err := p.flush(ctx, time.Now()); err != nil {
			return err
		}
		events, err := p.c.store.NextEvents(ctx, p.cursor, pipelineBatch)
		if err != nil {
			return fmt.Errorf("read events after %d: %w", p.cursor, err)
		}
		// After the events: a rule committed before an event was stored
		// is then in the revision read (read before, it could miss a rule
		// applied between that read and the event's commit).
		if err := p.loadRules(ctx); err != nil {
			return err
		}
		if len(events) > 0 {
			if err := p.process(ctx, events, time.Now()); err != nil {
				return err
			}
			if len(events) == pipelineBatch {
				continue // more are waiting
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.ingested:
		case <-tick.C:
		}
	}
}

// loadRules rereads rules and maintenance when their revision moved. It
// looks after reading every batch, before judging it, so an event stored
// after a rule was applied is judged by it.
func (p *pipelineRunner) loadRules(ctx context.Context) error {
	rev, err := p.c.store.RulesRevision(ctx)
	if err != nil {
		return fmt.Errorf("read rules revision: %w", err)
	}
	if p.loaded && rev == p.rulesRev {
		return nil
	}
	rs, err := p.c.store.ListEventRules(ctx)
	if err != nil {
		return fmt.Errorf("list event rules: %w", err)
	}
	var compiled []eventrules.Rule
	for _, r := range rs {
		cr, err := eventrules.Compile(r)
		if err != nil {
			p.c.log.Warn("stored event rule is no longer valid; ignored", "rule", r.GetName(), "err", err)
			continue
		}
		compiled = append(compiled, cr)
	}
	ms, err := p.c.store.ListMaintenance(ctx)
	if err != nil {
		return fmt.Errorf("list maintenance: %w", err)
	}
	var windows []maintenance.Window
	for _, m := range ms {
		w, err := maintenance.Compile(m, time.Now())
		if err != nil {
			p.c.log.Warn("stored maintenance is no longer valid; ignored", "maintenance", m.GetName(), "err", err)
			continue
		}
		windows = append(windows, w)
	}
	p.state.Rules, p.state.Maintenance = eventrules.NewSet(compiled), maintenance.NewSet(windows...)
	p.rulesRev, p.loaded = rev, true
	p.c.log.Info("event rules loaded", "rules", len(compiled), "maintenance", len(windows), "revision", rev)
	return nil
}

// process decides a batch of events and commits it with the cursor.
func (p *pipelineRunner) process(ctx context.Context, events []store.SeqEvent, now time.Time) error {
	batch := make([]*unyov1.Event, len(events))
	for i, se := range events {
		batch[i] = se.Event
	}
	d := p.stages.Decide(p.state, batch, now)
	for i := range d.Explained { // one per event, in order
		d.Explained[i].Seq = events[i].Seq
	}
	expect, cursor := p.cursor, events[len(events)-1].Seq
	// The history records how each event was silenced; it is in the WAL
	// before the commit, so a kill after the commit does not lose it.
	history := p.c.historyEntries(events, d.Explained)
	logged := p.c.logHistory(ctx, expect, cursor, history)
	if err := p.commit(ctx, d, cursor); err != nil {
		if logged {
			p.c.abortHistory(context.WithoutCancel(ctx), expect, cursor)
		}
		return fmt.Errorf("commit %d processed events: %w", len(events), err)
	}
	p.c.count("unyo_pipeline_events_total", len(events))
	p.c.writeHistory(ctx, history)
	return nil
}

// flush runs the actions of aggregate groups whose window has ended.
func (p *pipelineRunner) flush(ctx context.Context, now time.Time) error {
	d := p.stages.Flush(p.state, now)
	if d == nil {
		return nil
	}
	if err := p.commit(ctx, d, p.cursor); err != nil {
		return fmt.Errorf("commit %d aggregate groups: %w", len(d.DeleteGroups), err)
	}
	return nil
}

// commit has the store apply d with the cursor moved to cursor, and then
// folds d into the in-memory state.
func (p *pipelineRunner) commit(ctx context.Context, d *pipeline.Decision, cursor int64) error {
	if err := p.c.store.CommitPipeline(ctx, &store.PipelineCommit{ExpectCursor: p.cursor, Cursor: cursor, Decision: *d}); err != nil {
		return err
	}
	p.cursor = cursor
	p.state.Apply(d)
	return nil
}

// eventTime is when an event happened (pipeline.EventTime): filter rules
// and the history judge it by the same time as the stages.
func eventTime(e *unyov1.Event) time.Time { return pipeline.EventTime(e) }
