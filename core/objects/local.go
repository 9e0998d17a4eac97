// Package objects is the part of ObjectService that a server answers from
// its own store: the kinds its tier owns (package kinds). A cluster serves
// cluster-owned kinds with it; root serves root-owned kinds with it and
// forwards the rest. Requests reach it validated and authorized; it stores,
// reads and deletes, and audits every change.
package objects

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/store"
)

// Local serves the kinds of one tier from one store.
type Local struct {
	Kinds *kinds.Registry
	Store store.Store
	Audit *rbac.Recorder
	Log   *slog.Logger
	Tier  kinds.Tier
	// Cluster is this server's cluster, set in every object it stores and
	// named in audit records and results; "" on root.
	Cluster string
}

// Kind resolves a kind as a request names it, refusing kinds another tier
// owns.
func (l *Local) Kind(name string) (kinds.Kind, error) {
	k, err := l.Kinds.Parse(name)
	if err != nil {
		return kinds.Kind{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kind: %w", err))
	}
	if k.Owner != l.Tier {
		return kinds.Kind{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kind: %s objects are kept by %s, not by %s", k.Name, k.Owner, l.Tier))
	}
	return k, nil
}

// Target names an object in audit records.
func (l *Local) Target(kind, name string) rbac.Target {
	return rbac.Target{Kind: kind, Name: name, Cluster: l.Cluster}
}

// applyResults pairs each object with what the store did with it.
func applyResults(objs []*unyov1.Object, results []store.PutResult) []*unyov1.ApplyResult {
	out := make([]*unyov1.ApplyResult, len(objs))
	for i, o := range objs {
		out[i] = &unyov1.ApplyResult{Ref: kinds.Ref(o), Action: string(results[i])}
	}
	return out
}

// Try runs an apply as Apply would, references and rules included, and
// rolls it back: the results say what Apply would do. Nothing is audited,
// since nothing changes.
func (l *Local) Try(ctx context.Context, objs []*unyov1.Object) ([]*unyov1.ApplyResult, error) {
	for _, o := range objs {
		kinds.SetCluster(o, l.Cluster)
	}
	l.Kinds.Prepare(objs)
	opts := l.applyOptions(objs)
	opts.DryRun = true
	results, err := l.Store.ApplyObjects(ctx, objs, opts)
	if refused := refusal(err); refused != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the apply would be refused: %w", refused))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("try the apply of %d objects: %w", len(objs), err))
	}
	return applyResults(objs, results), nil
}

// Apply stores validated, authorized objects in one transaction: a refused
// or abandoned apply (the client timed out) stores nothing. Each change is
// audited with the version it replaced.
func (l *Local) Apply(ctx context.Context, objs []*unyov1.Object) ([]*unyov1.ApplyResult, error) {
	previous := l.previous(ctx, objs)
	for _, o := range objs {
		kinds.SetCluster(o, l.Cluster)
	}
	l.Kinds.Prepare(objs)
	results, err := l.Store.ApplyObjects(ctx, objs, l.applyOptions(objs))
	var audit []rbac.Entry
	for i, o := range objs {
		if err == nil && results[i] == store.Unchanged {
			continue
		}
		kind, name := kinds.KindOf(o), kinds.Name(o)
		audit = append(audit, rbac.Entry{Procedure: "ObjectService/Apply", Target: l.Target(kind, name),
			Before: previous[kind+"/"+name], After: o, Err: err})
	}
	l.Audit.RecordAll(ctx, audit)
	if refused := refusal(err); refused != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("nothing was stored: %w", refused))
	}
	if err != nil && ctx.Err() != nil {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the apply of %d objects did not finish before the client gave up; nothing was stored: %w", len(objs), err))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("store the apply of %d objects (nothing was stored): %w", len(objs), err))
	}
	return applyResults(objs, results), nil
}

// Delete removes an authorized object; one that is absent is "not found",
// not an error.
func (l *Local) Delete(ctx context.Context, k kinds.Kind, name string) (*unyov1.ApplyResult, error) {
	before := l.current(ctx, k.Name, name)
	err := l.Store.DeleteObject(ctx, k.Name, name)
	action := "deleted"
	switch {
	case errors.Is(err, store.ErrNotFound):
		action = "not found"
	case errors.Is(err, store.ErrReferenced):
		l.Audit.Record(ctx, "ObjectService/Delete", l.Target(k.Name, name), before, nil, err)
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w; delete or change them first", err))
	case err != nil:
		l.Audit.Record(ctx, "ObjectService/Delete", l.Target(k.Name, name), before, nil, err)
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("delete %s %q: %w", k.Name, name, err))
	default:
		l.Audit.Record(ctx, "ObjectService/Delete", l.Target(k.Name, name), before, nil, nil)
	}
	return &unyov1.ApplyResult{Ref: &unyov1.ObjectRef{Kind: k.Name, Name: name, Cluster: l.Cluster}, Action: action}, nil
}

// Get returns one object with its count.
func (l *Local) Get(ctx context.Context, k kinds.Kind, name string) (*unyov1.Object, error) {
	o, err := l.Store.GetObject(ctx, k.Name, name)
	if errors.Is(err, store.ErrNotFound) {
		where := "root"
		if l.Cluster != "" {
			where = fmt.Sprintf("cluster %q", l.Cluster)
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q not found in %s", k.Name, name, where))
	}
	if err == nil {
		err = l.showCounts(ctx, k, []*unyov1.Object{o})
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("get %s %q: %w", k.Name, name, err))
	}
	return o, nil
}

// List returns every object of a kind with its count, sorted by name.
func (l *Local) List(ctx context.Context, k kinds.Kind) ([]*unyov1.Object, error) {
	objs, err := l.Store.ListObjects(ctx, k.Name)
	if err == nil {
		err = l.showCounts(ctx, k, objs)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list %s objects: %w", k.Name, err))
	}
	return objs, nil
}

// showCounts fills in the counts the store keeps beside objects of a kind
// that shows one.
func (l *Local) showCounts(ctx context.Context, k kinds.Kind, objs []*unyov1.Object) error {
	if k.Count == "" {
		return nil
	}
	counts, err := l.Store.ObjectCounts(ctx, k.Name)
	if err != nil {
		return err
	}
	for _, o := range objs {
		l.Kinds.ShowCount(o, counts[kinds.Name(o)])
	}
	return nil
}

// listAbove is the number of objects of one kind in an apply above which
// their previous versions are read with one list instead of one get each.
const listAbove = 50

// previous returns the stored objects an apply replaces, by "Kind/name",
// for the audit log.
func (l *Local) previous(ctx context.Context, objs []*unyov1.Object) map[string]proto.Message {
	byKind := map[string][]string{}
	for _, o := range objs {
		byKind[kinds.KindOf(o)] = append(byKind[kinds.KindOf(o)], kinds.Name(o))
	}
	out := map[string]proto.Message{}
	for kind, names := range byKind {
		if len(names) <= listAbove {
			for _, n := range names {
				if o := l.current(ctx, kind, n); o != nil {
					out[kind+"/"+n] = o
				}
			}
			continue
		}
		all, err := l.Store.ListObjects(ctx, kind)
		if err != nil {
			l.Log.Warn("reading objects' previous versions for the audit log failed", "kind", kind, "err", err)
			continue
		}
		for _, o := range all {
			out[kind+"/"+kinds.Name(o)] = o
		}
	}
	return out
}

// current returns the stored object a write replaces, for the audit log;
// nil when there is none (or it cannot be read: the write goes on).
func (l *Local) current(ctx context.Context, kind, name string) proto.Message {
	o, err := l.Store.GetObject(ctx, kind, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			l.Log.Warn("reading an object's previous version for the audit log failed", "kind", kind, "name", name, "err", err)
		}
		return nil
	}
	return o
}
