package agent

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/logtail"
)

// logChecks matches tailed lines against the log checks. Matches are only
// counted here; emit turns them into at most one event per check and
// interval, so that a flood of matching lines is one event, not thousands.
// There is never a recovery event: a line that stops appearing says nothing
// about whether the problem is gone, so alerts stay open until an operator
// closes them.
type logChecks struct {
	mu      sync.Mutex
	defs    []checks.Definition
	windows map[string]*logWindow // by check name
	// matched wakes logChecksLoop when a window gets its first match;
	// with none pending the loop sleeps rather than tick every second.
	matched chan struct{}
}

// logWindow is what a check matched since its last event.
type logWindow struct {
	count    int
	first    logtail.Record
	lastEmit time.Time
}

// logHit is one event to raise.
type logHit struct {
	def   checks.Definition
	count int
	first logtail.Record
}

// set replaces the log checks; a check that stays keeps its window, so a
// re-applied check does not lift its rate limit.
func (l *logChecks) set(defs []checks.Definition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.defs = defs
	windows := make(map[string]*logWindow, len(defs))
	for _, d := range defs {
		if w := l.windows[d.Name]; w != nil {
			windows[d.Name] = w
		} else {
			windows[d.Name] = &logWindow{}
		}
	}
	l.windows = windows
}

func (l *logChecks) observe(batch []logtail.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.defs {
		w := l.windows[d.Name]
		for _, r := range batch {
			if d.Log.Matches(r.App, r.File, r.Level, r.Message, r.Fields) {
				if w.count == 0 {
					w.first = r
					select {
					case l.matched <- struct{}{}:
					default:
					}
				}
				w.count++
			}
		}
	}
}

// pending says whether a window holds matches not yet raised.
func (l *logChecks) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.windows {
		if w.count > 0 {
			return true
		}
	}
	return false
}

// due returns the checks with matches whose last event is at least an
// interval old, and starts their next window.
func (l *logChecks) due(now time.Time) []logHit {
	l.mu.Lock()
	defer l.mu.Unlock()
	var hits []logHit
	for _, d := range l.defs {
		w := l.windows[d.Name]
		if w.count == 0 || (!w.lastEmit.IsZero() && now.Sub(w.lastEmit) < d.Interval) {
			continue
		}
		hits = append(hits, logHit{def: d, count: w.count, first: w.first})
		w.count, w.first, w.lastEmit = 0, logtail.Record{}, now
	}
	return hits
}

// logChecksLoop raises the events of log checks' matches, a second after
// the first match of a window (matches of that second are one event), and
// then every second while matches wait for their check's interval. With
// no match waiting it sleeps: an agent without log checks, or whose lines
// match none, is not woken every second for nothing.
func (a *Agent) logChecksLoop(ctx context.Context) {
	for {
		if !a.logChecks.pending() {
			select {
			case <-ctx.Done():
				return
			case <-a.logChecks.matched:
			}
		}
		if !ctxwait.Sleep(ctx, time.Second) {
			return
		}
		now := time.Now()
		for _, h := range a.logChecks.due(now) {
			a.spoolResult(a.logEvent(h, now))
		}
	}
}

// maxQuoted bounds the line quoted in a log check's output.
const maxQuoted = 300

func (a *Agent) logEvent(h logHit, now time.Time) *unyov1.Event {
	e := a.newEvent(h.def)
	e.StartedAt, e.Duration = timestamppb.New(now), durationpb.New(0)
	e.Level = h.def.Log.Level
	e.Status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	if e.Level == unyov1.Level_LEVEL_WARNING {
		e.Status = unyov1.CheckStatus_CHECK_STATUS_WARNING
	}
	msg := h.first.Message
	if len(msg) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	where := h.first.File
	if where == "" {
		where = h.first.App
	}
	if h.count == 1 {
		e.Output = fmt.Sprintf("1 log line matched in %s: %q", where, msg)
	} else {
		e.Output = fmt.Sprintf("%d log lines matched in %s since the last event; first: %q", h.count, where, msg)
	}
	return e
}
