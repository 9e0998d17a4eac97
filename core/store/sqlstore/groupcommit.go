package sqlstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// groupCommit merges concurrent AppendEvents calls into one transaction.
// Transactions on the events tables cost mostly per transaction (commit,
// and B-tree pages dirtied once however many rows land on them), so
// committing four batches of 500 together is much cheaper than one by one.
// On SQLite the writes are serialized anyway, so nothing is lost by merging.
//
// There is no background goroutine: a caller that finds no transaction
// running becomes the leader and commits everything queued up to and
// including its own call; calls arriving meanwhile wait for the next leader
// among them. Each leader commits one group, so no caller serves others
// indefinitely.
type groupCommit struct {
	s *Store
	// maxRows bounds the events merged into one transaction beyond the
	// leader's own, so a transaction stays short.
	maxRows int
	// slot is held by the current leader.
	slot chan struct{}

	mu      sync.Mutex
	pending []*appendCall
}

type appendCall struct {
	ctx  context.Context
	rows []eventRow
	done chan struct{} // closed when n and err are set
	n    int
	err  error
}

func newGroupCommit(s *Store, maxRows int) *groupCommit {
	return &groupCommit{s: s, maxRows: maxRows, slot: make(chan struct{}, 1)}
}

func (g *groupCommit) append(ctx context.Context, rows []eventRow) (int, error) {
	call := &appendCall{ctx: ctx, rows: rows, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, call)
	g.mu.Unlock()

	select {
	case <-call.done:
		return call.n, call.err
	case <-ctx.Done():
		// If a leader has taken the call already, its events may still
		// commit, as with any call cancelled mid-flight; the caller cannot
		// tell, but ids make a retry safe.
		g.withdraw(call)
		select {
		case <-call.done: // finished meanwhile after all
			return call.n, call.err
		default:
			return 0, ctx.Err()
		}
	case g.slot <- struct{}{}:
	}
	defer func() { <-g.slot }()
	// The previous leader may have committed this call before handing over.
	select {
	case <-call.done:
		return call.n, call.err
	default:
	}
	g.commit(g.take(call))
	<-call.done
	return call.n, call.err
}

// withdraw removes a call if no leader has taken it yet.
func (g *groupCommit) withdraw(call *appendCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.pending, call); i >= 0 {
		g.pending = slices.Delete(g.pending, i, i+1)
	}
}

// take removes and returns the queued calls up to and including own (all of
// them older, so they are due first), then more while under maxRows.
func (g *groupCommit) take(own *appendCall) []*appendCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, rows, ownSeen := 0, 0, false
	for _, c := range g.pending {
		if ownSeen && rows+len(c.rows) > g.maxRows {
			break
		}
		n++
		rows += len(c.rows)
		ownSeen = ownSeen || c == own
	}
	calls := g.pending[:n:n]
	g.pending = append([]*appendCall(nil), g.pending[n:]...)
	return calls
}

// commit runs one transaction for calls and hands each its result.
func (g *groupCommit) commit(calls []*appendCall) {
	// The transaction is abandoned only when every caller has given up:
	// one caller's cancelled context must not fail the others.
	ctx, cancel := context.WithCancel(context.WithoutCancel(calls[0].ctx))
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(calls)))
	batches := make([][]eventRow, len(calls))
	for i, c := range calls {
		batches[i] = c.rows
		stop := context.AfterFunc(c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	counts, err := g.s.appendTx(ctx, batches)
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.n = counts[i]
		}
		close(c.done)
	}
}
