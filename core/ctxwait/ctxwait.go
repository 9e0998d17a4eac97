// Package ctxwait waits for a duration or a context, whichever ends first:
// the pause of every retry and poll loop that must stop promptly on shutdown;
// and says when periodic work that shares fixed instants of the clock wakes
// next (NextTick).
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d and reports true, or returns false as soon as ctx ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// NextTick is the first instant after now whose Unix time is phase modulo
// every. Periodic loops of one process that wake at such instants share
// one wake-up; different phases spread a fleet's.
func NextTick(now time.Time, every, phase time.Duration) time.Time {
	off := (now.UnixNano() - int64(phase)) % int64(every)
	if off < 0 {
		off += int64(every)
	}
	return now.Add(every - time.Duration(off))
}
