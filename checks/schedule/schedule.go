// Package schedule runs check Definitions on their schedules: interval
// checks on a per-node splayed grid, cron checks at their cron times, with a
// cap on concurrent runs and never two runs of one check at once.
package schedule

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/ctxwait"
)

// RunFunc runs one check once; typically it executes the plugin and reports
// the result. ctx is cancelled when the check is removed or changed or the
// scheduler stops, and RunFunc should then return promptly; a result it
// produces after that is for a definition that no longer applies.
type RunFunc func(ctx context.Context, d checks.Definition)

// Options configure a Scheduler.
type Options struct {
	// NodeName is this node's name. With the check name it fixes each interval
	// check's offset, so that a fleet does not run a check all in the same
	// second while each node keeps a steady rhythm.
	NodeName string
	// MaxConcurrent caps runs in progress; 0 means DefaultMaxConcurrent().
	MaxConcurrent int
	// Tick, when set, starts interval checks only at this node's instants
	// of Tick, those whose Unix time is TickPhase modulo Tick: each run at
	// the first such instant at or after its splayed time. On an agent,
	// every wake-up costs more than the work it wakes for (the Go runtime
	// wakes threads, and its monitor polls while anything runs), and checks
	// splayed anywhere in a second each take one of their own; on a tick,
	// the runs due in the same second share one. Only intervals that are
	// whole multiples of Tick move, so each check keeps its interval
	// exactly and starts at most Tick late; cron checks run at their times.
	Tick      time.Duration
	TickPhase time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultMaxConcurrent is twice the CPUs, and at least 4: plugins mostly
// wait on the network or disks rather than compute.
func DefaultMaxConcurrent() int {
	return max(4, 2*runtime.NumCPU())
}

// Stats are counters for the agent's status and metrics.
type Stats struct {
	// Checks is how many checks are scheduled.
	Checks int
	// Running is how many runs are in progress or waiting for a slot.
	Running int
	// Started counts runs handed to the RunFunc.
	Started uint64
	// Skipped counts runs skipped because the check's previous run had not
	// finished.
	Skipped uint64
}

// Scheduler runs checks. Update sets which checks exist, at any time; Run
// runs them until its context ends.
type Scheduler struct {
	run  RunFunc
	node string
	log  *slog.Logger
	// tick and tickPhase are Options.Tick and TickPhase.
	tick, tickPhase time.Duration
	// sem holds a token per run in progress.
	sem chan struct{}

	mu      sync.Mutex
	entries map[string]*entry
	// inflight is keyed by check name rather than entry so that a changed
	// check's new schedule cannot overlap the old one's last run.
	inflight map[string]bool
	ctx      context.Context // non-nil while Run runs
	wg       sync.WaitGroup  // schedule loops and runs
	started  uint64
	skipped  uint64
}

type entry struct {
	def    checks.Definition
	hash   string
	cancel context.CancelFunc // nil while not running
}

// New returns a Scheduler that calls run for each due check.
func New(run RunFunc, opts Options) *Scheduler {
	n := opts.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{
		run:       run,
		node:      opts.NodeName,
		log:       log,
		tick:      opts.Tick,
		tickPhase: opts.TickPhase,
		sem:       make(chan struct{}, n),
		entries:   make(map[string]*entry),
		inflight:  make(map[string]bool),
	}
}

// Update makes defs the set of scheduled checks: it starts new checks,
// stops removed ones and restarts changed ones (by SpecHash). Unchanged
// checks are left alone and keep their timing. Stopping a check cancels its
// run in progress. Update keeps the Definitions; do not modify them after.
func (s *Scheduler) Update(defs []checks.Definition) {
	want := make(map[string]checks.Definition, len(defs))
	for _, d := range defs {
		if _, dup := want[d.Name]; dup {
			s.log.Warn("two checks have the same name; scheduling only the first", "check", d.Name)
			continue
		}
		if d.Schedule == nil && d.Interval < checks.MinInterval {
			// Only a Definition that did not come from checks.Compile.
			s.log.Error("check has no schedule; not scheduling it", "check", d.Name, "interval", d.Interval)
			continue
		}
		want[d.Name] = d
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.entries {
		d, ok := want[name]
		switch {
		case !ok:
			e.stop()
			delete(s.entries, name)
			s.log.Info("check removed", "check", name)
		case d.SpecHash() != e.hash:
			e.stop()
			s.add(d)
			s.log.Info("check changed; rescheduled", "check", name, "revision", d.Revision)
		}
	}
	for name, d := range want {
		if _, ok := s.entries[name]; !ok {
			s.add(d)
			s.log.Info("check scheduled", "check", name, "revision", d.Revision, "next", s.NextRun(d, time.Now()))
		}
	}
}

// add schedules d, starting it if Run is running. s.mu must be held.
func (s *Scheduler) add(d checks.Definition) {
	e := &entry{def: d, hash: d.SpecHash()}
	s.entries[d.Name] = e
	if s.ctx != nil {
		s.start(e)
	}
}

// start runs e's schedule loop. s.mu must be held and s.ctx set.
func (s *Scheduler) start(e *entry) {
	ctx, cancel := context.WithCancel(s.ctx)
	e.cancel = cancel
	s.wg.Add(1)
	go s.loop(ctx, e)
}

func (e *entry) stop() {
	if e.cancel != nil {
		e.cancel()
		e.cancel = nil
	}
}

// Run runs the scheduled checks until ctx ends, then cancels runs in
// progress and waits for them to return. It returns nil after ctx ends, or
// an error if the Scheduler is already running.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		return errors.New("the check scheduler is already running")
	}
	s.ctx = ctx
	for _, e := range s.entries {
		s.start(e)
	}
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	for _, e := range s.entries {
		e.stop()
	}
	s.ctx = nil
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Stats returns the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Checks: len(s.entries), Running: len(s.inflight), Started: s.started, Skipped: s.skipped}
}

func (s *Scheduler) loop(ctx context.Context, e *entry) {
	defer s.wg.Done()
	for {
		// Computed from the clock each time rather than by adding the
		// interval, so a slow machine or a suspend does not make runs drift
		// or bunch up.
		now := time.Now()
		next := s.NextRun(e.def, now)
		if next.IsZero() {
			s.log.Error("check's cron schedule has no next run time; it will not run again", "check", e.def.Name, "cron", e.def.Cron)
			return
		}
		timer := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		s.fire(ctx, e.def)
	}
}

// fire starts one run of d unless its previous run is still going. The run
// waits for a concurrency slot but still counts as in flight meanwhile, so
// a busy agent queues at most one run per check.
func (s *Scheduler) fire(ctx context.Context, d checks.Definition) {
	s.mu.Lock()
	if s.inflight[d.Name] {
		s.skipped++
		s.mu.Unlock()
		s.log.Warn("check is still running from its previous run; skipping this run", "check", d.Name)
		return
	}
	s.inflight[d.Name] = true
	s.wg.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, d.Name)
			s.mu.Unlock()
		}()
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-s.sem }()
		s.mu.Lock()
		s.started++
		s.mu.Unlock()
		s.run(ctx, d)
	}()
}

// Splay is an interval check's offset on a node: a deterministic point in
// [0, interval) derived from the node and check names.
func Splay(node, check string, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{0}) // so that ("ab", "c") and ("a", "bc") differ
	h.Write([]byte(check))
	return time.Duration(h.Sum64() % uint64(interval))
}

// NextRun is when d runs next after now, or the zero time if never.
//
// An interval check runs at the instants whose Unix time is its Splay modulo
// the interval. Anchoring the grid to the clock rather than to when the
// agent started keeps a check's rhythm across agent restarts and check
// updates, and keeps the fleet's runs spread out. A cron check runs at its
// schedule's times and is not splayed: its operator chose the time.
func NextRun(d checks.Definition, node string, now time.Time) time.Time {
	if d.Schedule != nil {
		return d.Schedule.Next(now)
	}
	iv := d.Interval
	if iv <= 0 {
		return time.Time{}
	}
	// Strictly after now, so a run that fires exactly on time schedules the
	// next one a full interval later.
	return ctxwait.NextTick(now, iv, Splay(node, d.Name, iv))
}

// NextRun is when this scheduler runs d next after now: NextRun of d on
// its node, moved to the node's next tick (Options.Tick) where d's
// interval is a multiple of it.
func (s *Scheduler) NextRun(d checks.Definition, now time.Time) time.Time {
	next := NextRun(d, s.node, now)
	if s.tick <= 0 || d.Schedule != nil || next.IsZero() || d.Interval%s.tick != 0 {
		return next
	}
	// The first tick at or after next. The run fired on it computes its
	// next from a now under a tick past its grid time, so within the
	// interval: runs stay exactly one interval apart.
	return ctxwait.NextTick(next.Add(-1), s.tick, s.tickPhase)
}
