package objects

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store"
)

// applyOptions has the store keep the references the batch's objects make
// and, when a kind of the batch has rules across objects, judge them
// inside the apply's transaction: two applies racing cannot each pass on
// a state the other changes.
func (l *Local) applyOptions(objs []*unyov1.Object) store.ApplyOptions {
	opts := store.ApplyOptions{Refs: func(o *unyov1.Object) []store.Ref {
		k, m, ok := l.Kinds.Of(o)
		if !ok {
			return nil
		}
		return k.Refs(m)
	}}
	var judged []proto.Message
	for _, o := range objs {
		if k, m, ok := l.Kinds.Of(o); ok && k.HasRules() {
			judged = append(judged, m)
		}
	}
	if len(judged) > 0 {
		opts.Check = func(ctx context.Context, r store.ObjectReader) error {
			return l.Kinds.CheckRules(ctx, judged, newView(objs, r))
		}
	}
	return opts
}

// refusal returns err if it refuses the apply for what it holds (a
// dangling reference, a broken rule) rather than failing to store it.
func refusal(err error) error {
	var ref *store.RefError
	var rules *kinds.RulesError
	if errors.As(err, &ref) || errors.As(err, &rules) {
		return err
	}
	return nil
}

// view is the state an apply leaves: the store read inside the apply's
// transaction, which already holds the batch. The batch's own messages
// and what was read once are kept, so that thousands of resources in a
// few racks decode each rack's contents once.
type view struct {
	r         store.ObjectReader
	objs      map[[2]string]proto.Message
	referrers map[[2]string][]kinds.Referrer
}

func newView(batch []*unyov1.Object, r store.ObjectReader) *view {
	v := &view{r: r, objs: map[[2]string]proto.Message{}, referrers: map[[2]string][]kinds.Referrer{}}
	for _, o := range batch {
		v.objs[[2]string{kinds.KindOf(o), kinds.Name(o)}] = kinds.Message(o)
	}
	return v
}

func (v *view) Get(ctx context.Context, kind, name string) (proto.Message, error) {
	key := [2]string{kind, name}
	if m, ok := v.objs[key]; ok {
		return m, nil
	}
	o, err := v.r.GetObject(ctx, kind, name)
	if errors.Is(err, store.ErrNotFound) {
		v.objs[key] = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := kinds.Message(o)
	v.objs[key] = m
	return m, nil
}

func (v *view) Referrers(ctx context.Context, kind, name string) ([]kinds.Referrer, error) {
	key := [2]string{kind, name}
	if rs, ok := v.referrers[key]; ok {
		return rs, nil
	}
	rs, err := v.r.Referrers(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	v.referrers[key] = rs
	return rs, nil
}
