package root

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
)

// ownAudit is the cluster name that selects root's own audit records.
const ownAudit = "root"

// auditService merges root's own audit log with the clusters'.
type auditService struct{ r *Root }

func (s *auditService) ListAudit(ctx context.Context, req *connect.Request[unyov1.ListAuditRequest]) (*connect.Response[unyov1.ListAuditResponse], error) {
	m := req.Msg
	f, err := rbac.AuditFilter(m)
	if err != nil {
		return nil, err
	}
	resp := &unyov1.ListAuditResponse{}
	p := server.PrincipalFrom(ctx)
	// Root's own records are about root and every cluster: only for a
	// caller scoped to all of them.
	if (m.GetCluster() == "" || m.GetCluster() == ownAudit) && len(p.Clusters) == 0 {
		own, err := s.r.store.ListAudit(ctx, f)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list root's audit records: %w", err))
		}
		resp.Records = own
	}
	if m.GetCluster() != ownAudit {
		targets, err := s.r.targets(ctx, m.GetCluster())
		if err != nil {
			return nil, err
		}
		answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.AuditRecord, error) {
			q := proto.Clone(m).(*unyov1.ListAuditRequest)
			q.Cluster = ""
			q.Limit = int32(f.Limit)
			out, err := c.Audit.ListAudit(ctx, connect.NewRequest(q))
			if err != nil {
				return nil, err
			}
			return out.Msg.GetRecords(), nil
		})
		resp.ClusterErrors = errs
		for _, a := range answers {
			resp.Records = append(resp.Records, a.value...)
		}
	}
	// unyo dev's root and cluster share one store: keep each record once.
	seen := map[string]bool{}
	recs := resp.Records[:0]
	for _, r := range resp.Records {
		if !seen[r.GetId()] {
			seen[r.GetId()] = true
			recs = append(recs, r)
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].GetAt().AsTime().After(recs[j].GetAt().AsTime()) })
	if len(recs) > f.Limit {
		recs = recs[:f.Limit]
	}
	resp.Records = recs
	return connect.NewResponse(resp), nil
}

// authorizeApply checks that the caller may write every object where it
// goes, before anything is sent to a cluster; a refusal is audited at root.
func (s *objectService) authorizeApply(ctx context.Context, objs []*unyov1.Object) error {
	for i, o := range objs {
		kind, name, where := kinds.KindOf(o), kinds.Name(o), kinds.Cluster(o)
		if err := server.RequireWrite(ctx, kind, where, cluster.RunsCommand(o)); err != nil {
			s.r.audit.Record(ctx, "ObjectService/Apply", rbac.Target{Kind: kind, Name: name, Cluster: where}, nil, o, err)
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("objects[%d] (%s %q): %s; nothing was applied", i, kind, name, message(err)))
		}
	}
	return nil
}

// authorizeDelete is authorizeApply for a delete.
func (s *objectService) authorizeDelete(ctx context.Context, refs []*unyov1.ObjectRef) error {
	for i, ref := range refs {
		k, err := s.r.opts.Kinds.Parse(ref.GetKind())
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("refs[%d]: kind: %w", i, err))
		}
		kind := k.Name
		if err := server.RequireWrite(ctx, kind, ref.GetCluster(), false); err != nil {
			s.r.audit.Record(ctx, "ObjectService/Delete", rbac.Target{Kind: kind, Name: ref.GetName(), Cluster: ref.GetCluster()}, nil, nil, err)
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("refs[%d] (%s %q): %s; nothing was deleted", i, kind, ref.GetName(), message(err)))
		}
	}
	return nil
}

func message(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}
