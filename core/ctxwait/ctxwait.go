// Package ctxwait waits for a duration or a context, whichever ends first:
// the pause of every retry and poll loop that must stop promptly on shutdown.
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
