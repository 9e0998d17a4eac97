package cluster

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
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
		if err := server.RequireWrite(ctx, kinds.KindOf(o), s.c.opts.Name, RunsCommand(o)); err != nil {
			s.c.audit.Record(ctx, "ObjectService/Apply", s.local.Target(kinds.KindOf(o), kinds.Name(o)), nil, o, err)
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("objects[%d] (%s %q): %s; nothing was applied", i, kinds.KindOf(o), kinds.Name(o), connectMessage(err)))
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

// actor is who an alert or maintenance change is recorded as: the
// credential's name; only a server without authentication takes the
// client's --by, and then one must be given.
func actor(ctx context.Context, claimed string) (string, error) {
	if server.PrincipalFrom(ctx).Kind == server.KindAnonymous && claimed == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("by: say who you are (--by NAME, or set UNYO_USER)"))
	}
	return server.ActorOr(ctx, claimed), nil
}
