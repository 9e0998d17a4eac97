package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

// filterCache holds the compiled rules for ingest, where Filter rules drop
// events before they are stored. Every replica ingests, so every replica
// keeps its own copy, re-read at most once a second when the rules change.
type filterCache struct {
	st  Store
	now func() time.Time

	mu  sync.Mutex
	at  time.Time
	rev int64
	set *eventrules.Set
}

func (f *filterCache) rules(ctx context.Context) (*eventrules.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set != nil && f.now().Sub(f.at) < time.Second {
		return f.set, nil
	}
	rev, err := f.st.RulesRevision(ctx)
	if err != nil {
		return nil, err
	}
	f.at = f.now()
	if f.set != nil && rev == f.rev {
		return f.set, nil
	}
	rs, err := f.st.ListEventRules(ctx)
	if err != nil {
		return nil, err
	}
	var compiled []eventrules.Rule
	for _, r := range rs {
		// The pipeline logs rules that no longer compile; here they are skipped.
		if cr, err := eventrules.Compile(r); err == nil {
			compiled = append(compiled, cr)
		}
	}
	f.set, f.rev = eventrules.NewSet(compiled), rev
	return f.set, nil
}

// filter drops the events a Filter rule matches and counts the drops per rule.
func (in *Ingester) filter(ctx context.Context, events []*unyov1.Event) ([]*unyov1.Event, error) {
	if len(events) == 0 {
		return events, nil
	}
	set, err := in.filters.rules(ctx)
	if err != nil {
		return nil, err
	}
	kept := events[:0]
	drops := map[string]int64{}
	for _, e := range events {
		// Rules are judged in event time, when the check ran: started_at,
		// which every stored event has.
		if r, ok := set.Filter(e, e.GetStartedAt().AsTime()); ok {
			drops[r.Name]++
			continue
		}
		kept = append(kept, e)
	}
	if len(drops) > 0 {
		if err := in.store.CountMatches(ctx, drops, nil); err != nil {
			in.log.Warn("counting filtered events failed", "err", err)
		}
	}
	return kept, nil
}
