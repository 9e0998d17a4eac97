package cluster

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// Audit is the cluster's audit log, for writes made outside this package
// (the identity work's node deletions).
func (c *Cluster) Audit() *rbac.Recorder { return c.audit }

// RunsCommand says whether applying o makes agents run a command of its
// author's choosing, which needs the separate commands right.
func RunsCommand(o *unyov1.Object) bool { return len(o.GetCheck().GetSpec().GetCommand()) > 0 }

// authorizeApply checks, before anything is stored, that the caller may
// write every object; a refusal is audited and stores nothing.
func (s *objectService) authorizeApply(ctx context.Context, objs []*unyov1.Object) error {
	for i, o := range objs {
		if err := server.RequireWrite(ctx, manifest.Kind(o), s.c.opts.Name, RunsCommand(o)); err != nil {
			s.c.audit.Record(ctx, "ObjectService/Apply", s.target(manifest.Kind(o), manifest.Name(o)), nil, o, err)
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("objects[%d] (%s %q): %s; nothing was applied", i, manifest.Kind(o), manifest.Name(o), connectMessage(err)))
		}
	}
	return nil
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

func (s *objectService) target(kind, name string) rbac.Target {
	return rbac.Target{Kind: kind, Name: name, Cluster: s.c.opts.Name}
}

// listAbove is the number of objects of one kind in an apply above which
// their previous versions are read with one list instead of one get each.
const listAbove = 50

// previous returns the stored objects an apply replaces, by "Kind/name",
// for the audit log.
func (s *objectService) previous(ctx context.Context, objs []*unyov1.Object) map[string]proto.Message {
	byKind := map[string][]string{}
	for _, o := range objs {
		byKind[manifest.Kind(o)] = append(byKind[manifest.Kind(o)], manifest.Name(o))
	}
	out := map[string]proto.Message{}
	for kindName, names := range byKind {
		k := s.c.kinds[kindName]
		if len(names) <= listAbove {
			for _, n := range names {
				if o := s.current(ctx, k, n); o != nil {
					out[kindName+"/"+n] = o
				}
			}
			continue
		}
		all, err := k.list(ctx, s.c.store)
		if err != nil {
			s.c.log.Warn("reading objects' previous versions for the audit log failed", "kind", kindName, "err", err)
			continue
		}
		for _, o := range all {
			out[kindName+"/"+manifest.Name(o)] = o
		}
	}
	return out
}

// current returns the stored object a write replaces, for the audit log;
// nil when there is none (or it cannot be read: the write goes on).
func (s *objectService) current(ctx context.Context, k kind, name string) proto.Message {
	o, err := k.get(ctx, s.c.store, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.c.log.Warn("reading an object's previous version for the audit log failed", "name", name, "err", err)
		}
		return nil
	}
	return o
}

// actor is who an alert or maintenance change is recorded as: the
// credential's name; only a server without authentication takes the
// client's --by, and then one must be given.
func actor(ctx context.Context, claimed string) (string, error) {
	if server.PrincipalFrom(ctx).Kind == server.KindAnonymous && claimed == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("by: say who you are (--by NAME, or set UNYO_USER)"))
	}
	return server.ActorOr(ctx, claimed), nil
}
