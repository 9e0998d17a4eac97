package sqlstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// groupCommit merges concurrent calls of one kind (AppendEvents, address
// allocations) into one transaction: run stores the inputs of several calls
// and returns each call's output. Transactions cost mostly per transaction
// (commit, and B-tree pages dirtied once however many rows land on them),
// so committing four batches of 500 together is much cheaper than one by
// one. On SQLite the writes are serialized anyway, so nothing is lost by
// merging.
//
// There is no background goroutine: a caller that finds no transaction
// running becomes the leader and commits everything queued up to and
// including its own call; calls arriving meanwhile wait for the next leader
// among them. Each leader commits one group, so no caller serves others
// indefinitely.
type groupCommit[In, Out any] struct {
	run func(ctx context.Context, ins []In) ([]Out, error)
	// weight is the size of a call's input (its rows).
	weight func(In) int
	// maxRows bounds the weight merged into one transaction beyond the
	// leader's own, so a transaction stays short.
	maxRows int
	// slot is held by the current leader.
	slot chan struct{}

	mu      sync.Mutex
	pending []*groupCall[In, Out]
}

type groupCall[In, Out any] struct {
	ctx  context.Context
	in   In
	done chan struct{} // closed when out and err are set
	out  Out
	err  error
}

func newGroupCommit[In, Out any](maxRows int, weight func(In) int, run func(context.Context, []In) ([]Out, error)) *groupCommit[In, Out] {
	return &groupCommit[In, Out]{run: run, weight: weight, maxRows: maxRows, slot: make(chan struct{}, 1)}
}

// do runs in in a group and returns its output.
func (g *groupCommit[In, Out]) do(ctx context.Context, in In) (Out, error) {
	call := &groupCall[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, call)
	g.mu.Unlock()

	select {
	case <-call.done:
		return call.out, call.err
	case <-ctx.Done():
		// If a leader has taken the call already, its writes may still
		// commit, as with any call cancelled mid-flight; the caller cannot
		// tell, but event ids and allocation holders make a retry safe.
		g.withdraw(call)
		select {
		case <-call.done: // finished meanwhile after all
			return call.out, call.err
		default:
			var zero Out
			return zero, ctx.Err()
		}
	case g.slot <- struct{}{}:
	}
	defer func() { <-g.slot }()
	// The previous leader may have committed this call before handing over.
	select {
	case <-call.done:
		return call.out, call.err
	default:
	}
	g.commit(g.take(call))
	<-call.done
	return call.out, call.err
}

// withdraw removes a call if no leader has taken it yet.
func (g *groupCommit[In, Out]) withdraw(call *groupCall[In, Out]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.pending, call); i >= 0 {
		g.pending = slices.Delete(g.pending, i, i+1)
	}
}

// take removes and returns the queued calls up to and including own (all of
// them older, so they are due first), then more while under maxRows.
func (g *groupCommit[In, Out]) take(own *groupCall[In, Out]) []*groupCall[In, Out] {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, rows, ownSeen := 0, 0, false
	for _, c := range g.pending {
		w := g.weight(c.in)
		if ownSeen && rows+w > g.maxRows {
			break
		}
		n++
		rows += w
		ownSeen = ownSeen || c == own
	}
	calls := g.pending[:n:n]
	g.pending = append([]*groupCall[In, Out](nil), g.pending[n:]...)
	return calls
}

// commit runs one transaction for calls and hands each its result.
func (g *groupCommit[In, Out]) commit(calls []*groupCall[In, Out]) {
	// The transaction is abandoned only when every caller has given up:
	// one caller's cancelled context must not fail the others.
	ctx, cancel := context.WithCancel(context.WithoutCancel(calls[0].ctx))
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(calls)))
	ins := make([]In, len(calls))
	for i, c := range calls {
		ins[i] = c.in
		stop := context.AfterFunc(c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	outs, err := g.run(ctx, ins)
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.out = outs[i]
		}
		close(c.done)
	}
}
