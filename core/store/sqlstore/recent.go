package sqlstore

import (
	"cmp"
	"slices"
	"sync"
)

// recentMax bounds the events recentEvents holds: ten of the pipeline's
// batches, a few megabytes.
const recentMax = 10000

// recentEvents holds the encoded events this store committed last, by seq,
// for the event pipeline, which reads them right after they are committed:
// NextEvents serves them from here instead of reading them back from the
// database (on PostgreSQL a round trip and an index scan of the history
// on the server, on SQLite the read and copy of every row).
//
// It serves only runs of seqs it knows whole. Each span is one committed
// transaction's whole range of seqs, taken from the event_seq counter, with
// the events it inserted (a seq without an event was a duplicate id, which
// the database does not hold either). Where spans are not adjacent,
// another writer (a replica on the same database) took the seqs between;
// from the first such gap on, the store reads the database only, as it is
// not the only writer.
type recentEvents struct {
	mu    sync.Mutex
	spans []recentSpan // in seq order, adjacent
	held  int          // events in spans
	// last is the end of the newest span added, kept when spans are
	// dropped, to notice another writer's seqs before the next span.
	last int64
	// shared is set once another writer's seqs were seen.
	shared bool
}

// recentSpan is a committed transaction's seqs (from, to] and its events in
// seq order.
type recentSpan struct {
	from, to int64
	events   []recentEvent
}

type recentEvent struct {
	seq  int64
	body []byte
}

// add records a committed transaction's seqs and events (in any order).
func (r *recentEvents) add(from, to int64, events []recentEvent) {
	slices.SortFunc(events, func(a, b recentEvent) int { return cmp.Compare(a.seq, b.seq) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shared {
		return
	}
	if r.last != 0 && from != r.last {
		// Another writer's seqs (or ours out of order): from now on the
		// database is the only complete record.
		r.shared, r.spans, r.held = true, nil, 0
		return
	}
	r.last = to
	r.spans = append(r.spans, recentSpan{from: from, to: to, events: events})
	r.held += len(events)
	for r.held > recentMax && len(r.spans) > 0 {
		r.held -= len(r.spans[0].events)
		r.spans = r.spans[1:]
	}
}

// next returns up to limit events with seqs above after, oldest first, if
// it holds the seqs from after on; ok is false when the database must be
// read instead. Spans wholly at or below after are dropped: the pipeline's
// cursor does not go back.
func (r *recentEvents) next(after int64, limit int) (events []recentEvent, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.spans) > 0 && r.spans[0].to <= after {
		r.held -= len(r.spans[0].events)
		r.spans = r.spans[1:]
	}
	if len(r.spans) == 0 || r.spans[0].from > after {
		return nil, false
	}
	for _, sp := range r.spans {
		for _, e := range sp.events {
			if e.seq <= after {
				continue
			}
			if len(events) == limit {
				return events, true
			}
			events = append(events, e)
		}
	}
	return events, true
}
