package schedule_test

// The scheduler tests run in testing/synctest bubbles: time is virtual and
// advances only when every goroutine in the bubble is blocked, so hours of
// schedule take microseconds and every timing assertion is exact.

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/checks/schedule"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

const node = "node-1"

func compile(t *testing.T, name, command string, spec *unyov1.CheckSpec) checks.Definition {
	t.Helper()
	spec.Command = []string{command}
	d, err := checks.Compile(&unyov1.Check{Name: name, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func every(t *testing.T, name, interval string) checks.Definition {
	return compile(t, name, "check_"+name, &unyov1.CheckSpec{Interval: interval})
}

func cronCheck(t *testing.T, name, command, cron string) checks.Definition {
	return compile(t, name, command, &unyov1.CheckSpec{Cron: cron})
}

type run struct {
	check   string
	command string
	at      time.Duration // since the bubble started
}

// recorder is a RunFunc that notes each run, optionally taking some
// virtual time over it.
type recorder struct {
	start time.Time
	took  time.Duration

	mu   sync.Mutex
	runs []run
}

func newRecorder(took time.Duration) *recorder {
	return &recorder{start: time.Now(), took: took}
}

func (r *recorder) run(ctx context.Context, d checks.Definition) {
	r.mu.Lock()
	r.runs = append(r.runs, run{d.Name, d.Command[0], time.Since(r.start)})
	r.mu.Unlock()
	if r.took > 0 {
		time.Sleep(r.took)
	}
}

func (r *recorder) of(check string) []run {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []run
	for _, x := range r.runs {
		if x.check == check {
			out = append(out, x)
		}
	}
	return out
}

func times(runs []run) []time.Duration {
	var out []time.Duration
	for _, r := range runs {
		out = append(out, r.at)
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// start runs s in the background and returns a function that stops it and
// waits for Run to return.
func start(t *testing.T, s *schedule.Scheduler) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// sleepUntil advances virtual time to offset since the bubble started.
func sleepUntil(start time.Time, offset time.Duration) {
	time.Sleep(time.Until(start.Add(offset)))
}

func TestSplay(t *testing.T) {
	for _, iv := range []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour, 24 * time.Hour, 7 * time.Second} {
		seen := map[time.Duration]bool{}
		for i := range 200 {
			n := "node-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			got := schedule.Splay(n, "disk", iv)
			if got < 0 || got >= iv {
				t.Fatalf("Splay(%q, disk, %v) = %v, outside [0, %v)", n, iv, got, iv)
			}
			if again := schedule.Splay(n, "disk", iv); again != got {
				t.Fatalf("Splay(%q, disk, %v) = %v then %v", n, iv, got, again)
			}
			seen[got] = true
		}
		// 200 nodes must spread out, not land in one second.
		if len(seen) < 190 {
			t.Errorf("interval %v: 200 nodes got only %d distinct offsets", iv, len(seen))
		}
	}
	if schedule.Splay("ab", "c", time.Hour) == schedule.Splay("a", "bc", time.Hour) {
		t.Error(`("ab", "c") and ("a", "bc") share an offset`)
	}
	if got := schedule.Splay(node, "disk", 0); got != 0 {
		t.Errorf("Splay with no interval = %v, want 0", got)
	}
}

func TestNextRunInterval(t *testing.T) {
	d := every(t, "disk", "1m")
	splay := schedule.Splay(node, "disk", time.Minute)
	now := time.Date(2025, 6, 1, 12, 0, 0, 123, time.UTC)
	prev := now
	for range 5 {
		next := schedule.NextRun(d, node, prev)
		if gap := next.Sub(prev); gap <= 0 || gap > time.Minute {
			t.Fatalf("NextRun(%v) = %v, %v later; want within (0, 1m]", prev, next, gap)
		}
		if phase := (next.UnixNano() - int64(splay)) % int64(time.Minute); phase != 0 {
			t.Fatalf("NextRun(%v) = %v, off the grid by %v", prev, next, time.Duration(phase))
		}
		if prev != now && next.Sub(prev) != time.Minute {
			t.Fatalf("a run on the grid at %v is followed by %v, want a minute later", prev, next)
		}
		prev = next
	}
}

func TestNextRunCron(t *testing.T) {
	d := cronCheck(t, "backup", "check_backup", "CRON_TZ=UTC 30 3 * * 1-5")
	now := time.Date(2025, 6, 6, 4, 0, 0, 0, time.UTC) // a Friday, after 03:30
	want := []time.Time{
		time.Date(2025, 6, 9, 3, 30, 0, 0, time.UTC), // Monday
		time.Date(2025, 6, 10, 3, 30, 0, 0, time.UTC),
	}
	for _, w := range want {
		got := schedule.NextRun(d, node, now)
		if !got.Equal(w) {
			t.Fatalf("NextRun(%v) = %v, want %v", now, got, w)
		}
		now = got
	}
	if got := schedule.NextRun(checks.Definition{}, node, now); !got.IsZero() {
		t.Errorf("NextRun with no schedule = %v, want the zero time", got)
	}
}

func TestIntervalRunsOnTheSplayedGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		s := schedule.New(rec.run, schedule.Options{NodeName: node, Logger: quiet()})
		s.Update([]checks.Definition{every(t, "disk", "10s")})
		stop := start(t, s)
		sleepUntil(rec.start, 45*time.Second)
		stop()

		splay := schedule.Splay(node, "disk", 10*time.Second)
		// The bubble starts at a whole minute, so the grid is the splay plus
		// multiples of the interval.
		first := splay
		if first == 0 {
			first = 10 * time.Second
		}
		var want []time.Duration
		for at := first; at < 45*time.Second; at += 10 * time.Second {
			want = append(want, at)
		}
		if got := times(rec.of("disk")); !slices.Equal(got, want) {
			t.Errorf("runs at %v, want %v", got, want)
		}
	})
}

func TestIntervalRunsOnTheNodesTicks(t *testing.T) {
	const tick, phase = time.Second, 300 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		s := schedule.New(rec.run, schedule.Options{NodeName: node, Logger: quiet(), Tick: tick, TickPhase: phase})
		// Names whose splays are off the ticks, so that moving them shows.
		var defs []checks.Definition
		for _, name := range []string{"disk", "load", "mem", "swap"} {
			defs = append(defs, every(t, name, "10s"))
		}
		odd := every(t, "odd", "1500ms") // not a multiple of the tick: not moved
		defs = append(defs, odd, cronCheck(t, "nightly", "check_nightly", "* * * * *"))
		s.Update(defs)
		stop := start(t, s)
		sleepUntil(rec.start, 65*time.Second)
		stop()

		for _, d := range defs[:4] {
			splay := schedule.Splay(node, d.Name, 10*time.Second)
			got := times(rec.of(d.Name))
			if len(got) != 6 && len(got) != 7 {
				t.Fatalf("%s: runs at %v, want one every 10 s for 65 s", d.Name, got)
			}
			for i, at := range got {
				grid := splay + time.Duration(i)*10*time.Second
				if splay == 0 {
					grid += 10 * time.Second
				}
				// The bubble starts at a whole minute: at is on a tick when
				// it is the phase modulo the tick.
				if at%tick != phase || at < grid || at >= grid+tick {
					t.Errorf("%s (splay %v): run %d at %v, want the first tick (%v modulo %v) at or after %v", d.Name, splay, i, at, phase, tick, grid)
				}
			}
		}
		// Off a tick multiple, a check keeps its splayed grid; cron its times.
		splay := schedule.Splay(node, "odd", 1500*time.Millisecond)
		for i, at := range times(rec.of("odd")) {
			if (at-splay)%(1500*time.Millisecond) != 0 {
				t.Errorf("odd: run %d at %v, off its grid (splay %v)", i, at, splay)
			}
		}
		if got := times(rec.of("nightly")); !slices.Equal(got, []time.Duration{time.Minute}) {
			t.Errorf("cron check ran at %v, want at 1m0s", got)
		}
	})
}

func TestCronRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		s := schedule.New(rec.run, schedule.Options{NodeName: node, Logger: quiet()})
		s.Update([]checks.Definition{
			cronCheck(t, "five", "check_five", "CRON_TZ=UTC */5 * * * *"),
			cronCheck(t, "ninety", "check_ninety", "@every 90s"),
		})
		stop := start(t, s)
		sleepUntil(rec.start, 16*time.Minute)
		stop()

		if got, want := times(rec.of("five")), []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute}; !slices.Equal(got, want) {
			t.Errorf("*/5 ran at %v, want %v", got, want)
		}
		var want []time.Duration
		for at := 90 * time.Second; at < 16*time.Minute; at += 90 * time.Second {
			want = append(want, at)
		}
		if got := times(rec.of("ninety")); !slices.Equal(got, want) {
			t.Errorf("@every 90s ran at %v, want %v", got, want)
		}
	})
}

func TestUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		s := schedule.New(rec.run, schedule.Options{NodeName: node, Logger: quiet()})

		// @every is not splayed and counts from when its loop starts, so it
		// shows whether Update left a check alone or restarted it.
		kept := cronCheck(t, "kept", "check_kept", "@every 60s")
		changed := cronCheck(t, "changed", "old_command", "@every 60s")
		removed := every(t, "removed", "10s")
		s.Update([]checks.Definition{kept, changed, removed})
		if got := s.Stats().Checks; got != 3 {
			t.Fatalf("Stats().Checks = %d, want 3", got)
		}
		stop := start(t, s)

		sleepUntil(rec.start, 90*time.Second)
		keptAgain := cronCheck(t, "kept", "check_kept", "@every 60s")
		keptAgain.Revision = 2 // a new revision of the same spec is unchanged
		added := every(t, "added", "10s")
		s.Update([]checks.Definition{
			keptAgain,
			cronCheck(t, "changed", "new_command", "@every 60s"),
			added,
		})
		updated := time.Now()
		sleepUntil(rec.start, 190*time.Second)
		stop()

		if got, want := times(rec.of("kept")), []time.Duration{60 * time.Second, 120 * time.Second, 180 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("unchanged check ran at %v, want %v (its timing kept)", got, want)
		}
		want := []run{{"changed", "old_command", 60 * time.Second}, {"changed", "new_command", 150 * time.Second}}
		if got := rec.of("changed"); !slices.Equal(got, want) {
			t.Errorf("changed check ran %v, want %v (restarted at 90s)", got, want)
		}
		for _, r := range rec.of("removed") {
			if r.at >= 90*time.Second {
				t.Errorf("removed check ran at %v", r.at)
			}
		}
		if got := len(rec.of("removed")); got < 8 {
			t.Errorf("check ran %d times before its removal, want 8 or 9", got)
		}
		addedRuns := rec.of("added")
		if len(addedRuns) != 10 {
			t.Fatalf("added check ran %d times in 100s, want 10: %v", len(addedRuns), addedRuns)
		}
		if first := rec.start.Add(addedRuns[0].at); !first.Equal(schedule.NextRun(added, node, updated)) {
			t.Errorf("added check first ran at %v, want its next grid slot", addedRuns[0].at)
		}
		if got := s.Stats().Checks; got != 3 {
			t.Errorf("Stats().Checks = %d, want 3", got)
		}
	})
}

func TestUpdateCancelsRemovedChecksRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		var runErr error
		returned := make(chan struct{})
		s := schedule.New(func(ctx context.Context, d checks.Definition) {
			close(started)
			<-ctx.Done()
			runErr = ctx.Err()
			close(returned)
		}, schedule.Options{NodeName: node, Logger: quiet()})
		s.Update([]checks.Definition{every(t, "slow", "1m")})
		stop := start(t, s)
		defer stop()

		<-started
		s.Update(nil)
		<-returned
		if runErr != context.Canceled {
			t.Errorf("run's context ended with %v, want context.Canceled", runErr)
		}
		synctest.Wait()
		if st := s.Stats(); st.Checks != 0 || st.Running != 0 {
			t.Errorf("Stats = %+v, want no checks and nothing running", st)
		}
	})
}

// runTracker is a RunFunc that takes virtual time and records the most
// runs in progress at once, per check and overall.
type runTracker struct {
	took time.Duration

	mu          sync.Mutex
	active      map[string]int
	total       int
	maxPerCheck int
	maxTotal    int
	runs        int
}

func (r *runTracker) run(ctx context.Context, d checks.Definition) {
	r.mu.Lock()
	if r.active == nil {
		r.active = map[string]int{}
	}
	r.active[d.Name]++
	r.total++
	r.runs++
	r.maxPerCheck = max(r.maxPerCheck, r.active[d.Name])
	r.maxTotal = max(r.maxTotal, r.total)
	r.mu.Unlock()

	time.Sleep(r.took) // ignores ctx: a plugin that takes its time to die

	r.mu.Lock()
	r.active[d.Name]--
	r.total--
	r.mu.Unlock()
}

func TestNoSelfOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		tr := &runTracker{took: 25 * time.Second}
		s := schedule.New(func(ctx context.Context, d checks.Definition) {
			rec.run(ctx, d)
			tr.run(ctx, d)
		}, schedule.Options{NodeName: node, Logger: quiet()})
		s.Update([]checks.Definition{every(t, "slow", "10s")})
		stop := start(t, s)
		sleepUntil(rec.start, 100*time.Second)
		st := s.Stats()
		stop()

		if tr.maxPerCheck != 1 {
			t.Errorf("a check ran %d times at once", tr.maxPerCheck)
		}
		// A 25s run on a 10s grid takes every third slot and skips two.
		got := times(rec.of("slow"))
		for i := 1; i < len(got); i++ {
			if gap := got[i] - got[i-1]; gap != 30*time.Second {
				t.Errorf("runs at %v: gap %v, want 30s", got, gap)
			}
		}
		if want := uint64(2 * (len(got) - 1)); st.Skipped < want {
			t.Errorf("Stats().Skipped = %d, want at least %d", st.Skipped, want)
		}
		if st.Started != uint64(len(got)) {
			t.Errorf("Stats().Started = %d, want %d", st.Started, len(got))
		}
	})
}

// A changed check's old run is cancelled, and the new schedule still waits
// for it to return rather than run beside it.
func TestChangedCheckDoesNotOverlapItsOldRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		var mu sync.Mutex
		var oldCtxErr error
		s := schedule.New(func(ctx context.Context, d checks.Definition) {
			rec.run(ctx, d)
			if d.Command[0] == "old" {
				time.Sleep(25 * time.Second) // ignores cancellation
				mu.Lock()
				oldCtxErr = ctx.Err()
				mu.Unlock()
			}
		}, schedule.Options{NodeName: node, Logger: quiet()})
		s.Update([]checks.Definition{compile(t, "c", "old", &unyov1.CheckSpec{Interval: "10s"})})
		stop := start(t, s)

		// Wait for the first run, then change the check while it runs.
		for len(rec.of("c")) == 0 {
			time.Sleep(time.Second)
		}
		first := rec.of("c")[0].at
		sleepUntil(rec.start, first+5*time.Second)
		s.Update([]checks.Definition{compile(t, "c", "new", &unyov1.CheckSpec{Interval: "10s"})})
		sleepUntil(rec.start, first+35*time.Second)
		st := s.Stats()
		stop()

		want := []run{{"c", "old", first}, {"c", "new", first + 30*time.Second}}
		if got := rec.of("c"); !slices.Equal(got, want) {
			t.Errorf("runs %v, want %v", got, want)
		}
		if st.Skipped != 2 {
			t.Errorf("Stats().Skipped = %d, want 2 (the slots while the old run lasted)", st.Skipped)
		}
		mu.Lock()
		defer mu.Unlock()
		if oldCtxErr != context.Canceled {
			t.Errorf("old run's context: %v, want context.Canceled", oldCtxErr)
		}
	})
}

func TestConcurrencyCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &runTracker{took: 9 * time.Second}
		s := schedule.New(tr.run, schedule.Options{NodeName: node, MaxConcurrent: 2, Logger: quiet()})
		var defs []checks.Definition
		for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
			defs = append(defs, every(t, name, "10s"))
		}
		s.Update(defs)
		stop := start(t, s)
		time.Sleep(2 * time.Minute)
		stop()

		if tr.maxTotal != 2 {
			t.Errorf("at most %d runs at once, want exactly the cap of 2", tr.maxTotal)
		}
		if tr.maxPerCheck != 1 {
			t.Errorf("a check ran %d times at once", tr.maxPerCheck)
		}
	})
}

// A run that finds every slot taken waits for one rather than being dropped.
func TestRunWaitsForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(3 * time.Second)
		s := schedule.New(rec.run, schedule.Options{NodeName: node, MaxConcurrent: 1, Logger: quiet()})
		// @every fires both at the same instants.
		s.Update([]checks.Definition{
			cronCheck(t, "p", "check_p", "@every 10s"),
			cronCheck(t, "q", "check_q", "@every 10s"),
		})
		stop := start(t, s)
		sleepUntil(rec.start, 17*time.Second)
		if st := s.Stats(); st.Running != 0 || st.Started != 2 {
			t.Errorf("Stats = %+v, want 2 started and none running", st)
		}
		stop()

		got := append(times(rec.of("p")), times(rec.of("q"))...)
		slices.Sort(got)
		if want := []time.Duration{10 * time.Second, 13 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("runs at %v, want %v (one after the other)", got, want)
		}
	})
}

func TestRunLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(0)
		var returnedAt time.Time
		started := make(chan struct{}, 1)
		s := schedule.New(func(ctx context.Context, d checks.Definition) {
			rec.run(ctx, d)
			started <- struct{}{}
			<-ctx.Done()
			time.Sleep(5 * time.Second) // slow to clean up
			returnedAt = time.Now()
		}, schedule.Options{NodeName: node, Logger: quiet()})

		// Checks set before Run wait for it.
		s.Update([]checks.Definition{every(t, "disk", "1m")})
		time.Sleep(time.Hour)
		if n := len(rec.of("disk")); n != 0 {
			t.Fatalf("ran %d times before Run", n)
		}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		<-started
		if err := s.Run(ctx); err == nil {
			t.Error("a second concurrent Run succeeded")
		}

		cancel()
		cancelled := time.Now()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if time.Now().Before(cancelled.Add(5*time.Second)) || returnedAt.IsZero() {
			t.Error("Run returned before the run in progress did")
		}

		// Once Run has returned nothing runs, even after an Update.
		s.Update([]checks.Definition{every(t, "disk", "1m"), every(t, "load", "1m")})
		time.Sleep(time.Hour)
		if n := len(rec.runs); n != 1 {
			t.Errorf("%d runs, want only the one before Run returned", n)
		}
	})
}

func TestUpdateSkipsBadDefinitions(t *testing.T) {
	s := schedule.New(func(context.Context, checks.Definition) {}, schedule.Options{Logger: quiet()})
	s.Update([]checks.Definition{
		every(t, "disk", "1m"),
		every(t, "disk", "2m"), // duplicate name
		{Name: "unscheduled"},  // not from Compile
		{Name: "fast", Interval: time.Millisecond},
	})
	if got := s.Stats().Checks; got != 1 {
		t.Errorf("Stats().Checks = %d, want 1", got)
	}
}
