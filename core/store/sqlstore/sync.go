package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// syncKind is one kind of record root hands a cluster in full (Computes
// with SyncComputes, Loadbalancers with SyncLoadbalancers), as syncAll
// needs it: M is root's message, R the stored row.
type syncKind[M interface{ GetName() string }, R any] interface {
	// query selects every row of the kind.
	query() string
	scan(scanner) (R, error)
	name(R) string
	// deleting says whether the row is being removed.
	deleting(R) bool
	// apply stores root's version d of a record, held as old when ok,
	// and returns the row as stored; changed is false when d changes
	// nothing the cluster does not maintain itself.
	apply(ctx context.Context, tx *sql.Tx, d M, old R, ok bool, ts *timestamppb.Timestamp) (r R, changed bool, err error)
	// drop handles a held row root no longer wants: it marks it deleting
	// (its agent removes the instance) and returns it with keep, or
	// removes it at once.
	drop(ctx context.Context, tx *sql.Tx, r R, ts *timestamppb.Timestamp) (out R, keep bool, err error)
}

// syncAll makes desired the set of records of one kind, in tx: records new
// to the cluster are stored, known ones take root's version, and those
// absent from desired are dropped; a record root wants again while it is
// being removed is stored anew only once the removal is done. It returns
// every row held, by name.
func syncAll[M interface{ GetName() string }, R any](ctx context.Context, tx *sql.Tx, k syncKind[M, R], desired []M, ts *timestamppb.Timestamp) ([]R, error) {
	rows, err := tx.QueryContext(ctx, k.query())
	if err != nil {
		return nil, err
	}
	all, err := scanAll(rows, k.scan)
	if err != nil {
		return nil, err
	}
	held := make(map[string]R, len(all))
	for _, r := range all {
		held[k.name(r)] = r
	}
	want := make(map[string]bool, len(desired))
	for _, d := range desired {
		want[d.GetName()] = true
		old, ok := held[d.GetName()]
		if ok && k.deleting(old) {
			continue
		}
		r, changed, err := k.apply(ctx, tx, d, old, ok, ts)
		if err != nil {
			return nil, err
		}
		if changed {
			held[d.GetName()] = r
		}
	}
	for name, r := range held {
		if want[name] || k.deleting(r) {
			continue
		}
		r, keep, err := k.drop(ctx, tx, r, ts)
		if err != nil {
			return nil, err
		}
		if keep {
			held[name] = r
		} else {
			delete(held, name)
		}
	}
	out := make([]R, 0, len(held))
	for _, r := range held {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b R) int { return cmp.Compare(k.name(a), k.name(b)) })
	return out, nil
}
