package rbac

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// DefaultAuditRetention is how long audit records are kept by default.
const DefaultAuditRetention = 400 * 24 * time.Hour

// MaxObjectJSON bounds each of a record's before and after.
const MaxObjectJSON = 16 << 10

// Target is what a write acted on.
type Target struct {
	Kind, Name, Cluster string
}

// Recorder writes audit records. A nil Recorder records nothing (tests of
// handlers that do not care).
type Recorder struct {
	Store  store.Audit
	Logger *slog.Logger
	Now    func() time.Time
}

// Entry is one write to record: procedure called on target, changing it
// from Before to After (nil: absent), with Err as the outcome.
type Entry struct {
	Procedure     string
	Target        Target
	Before, After proto.Message
	Err           error
}

// Record stores that the caller of ctx called procedure on target, changing
// it from before to after (nil: absent), with err as the outcome. Identity
// and other writers call it too: it is the one way into the audit log.
// Failing to record is logged, not returned: the write has happened.
func (r *Recorder) Record(ctx context.Context, procedure string, target Target, before, after proto.Message, err error) {
	r.RecordAll(ctx, []Entry{{Procedure: procedure, Target: target, Before: before, After: after, Err: err}})
}

// RecordAll is Record for many writes of one request (an apply), stored
// together.
func (r *Recorder) RecordAll(ctx context.Context, entries []Entry) {
	if r == nil || len(entries) == 0 {
		return
	}
	who, from := server.ActorFrom(ctx)
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	at := timestamppb.New(now())
	recs := make([]*unyov1.AuditRecord, len(entries))
	for i, e := range entries {
		recs[i] = &unyov1.AuditRecord{
			Id: newID(), At: at, Who: who, From: from, Procedure: e.Procedure,
			Kind: e.Target.Kind, Name: e.Target.Name, Cluster: e.Target.Cluster,
			Before: ObjectJSON(e.Before), After: ObjectJSON(e.After), Outcome: Outcome(e.Err),
		}
	}
	// The request may be over (a client that gave up) but its write is not.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if serr := r.Store.AppendAudit(sctx, recs...); serr != nil {
		log := r.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Error("audit records could not be stored; the writes they record did happen",
			"who", who, "procedure", entries[0].Procedure, "records", len(recs), "first_kind", entries[0].Target.Kind, "first_name", entries[0].Target.Name, "err", serr)
	}
}

// writeProcedures are the calls whose refusal at the door is audited too;
// refused reads are not (they change nothing and would flood the log).
var writeProcedures = map[string]bool{
	unyov1connect.ObjectServiceApplyProcedure:               true,
	unyov1connect.ObjectServiceDeleteProcedure:              true,
	unyov1connect.AlertServiceAckAlertProcedure:             true,
	unyov1connect.AlertServiceCloseAlertProcedure:           true,
	unyov1connect.MaintenanceServiceEndMaintenanceProcedure: true,
	unyov1connect.NetworkServiceAllocateAddressProcedure:    true,
	unyov1connect.NetworkServiceReleaseAddressProcedure:     true,
	unyov1connect.TokenServiceCreateTokenProcedure:          true,
	unyov1connect.TokenServiceRevokeTokenProcedure:          true,
}

// Denied records a write refused before its body was read (server.Auth's
// Denied hook): who tried, from where, which procedure; the target is
// unknown then.
func (r *Recorder) Denied(req *http.Request, procedure string, p server.Principal, err error) {
	if !writeProcedures[procedure] {
		return
	}
	ctx := server.WithPrincipal(req.Context(), p)
	r.Record(ctx, strings.TrimPrefix(procedure, "/unyo.v1."), Target{}, nil, nil, err)
}

// Outcome is how an error reads in the audit log.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		if ce.Code() == connect.CodePermissionDenied {
			return "denied: " + ce.Message()
		}
		return ce.Code().String() + ": " + ce.Message()
	}
	return "failed: " + err.Error()
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// secretKeys are the fields whose values never enter the audit log: a
// check's environment and a hook's headers hold credentials by design.
var secretKeys = []string{"env", "headers", "token", "secret", "password", "authorization", "cluster_token"}

// ObjectJSON is m as the audit log keeps it: JSON with every value under a
// secret field redacted (the names kept), and bounded to MaxObjectJSON.
func ObjectJSON(m proto.Message) string {
	if m == nil || !m.ProtoReflect().IsValid() {
		return ""
	}
	// An applied object is recorded as what it holds (the check, the
	// rule), the same shape as records of other writes to it.
	if o, ok := m.(*unyov1.Object); ok {
		r := o.ProtoReflect()
		if fd := r.WhichOneof(r.Descriptor().Oneofs().ByName("kind")); fd != nil {
			m = r.Get(fd).Message().Interface()
		}
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	b, _ = json.Marshal(redact(v, false))
	if len(b) > MaxObjectJSON {
		return string(b[:MaxObjectJSON]) + "…(truncated)"
	}
	return string(b)
}

func redact(v any, secret bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s := secret
			for _, sk := range secretKeys {
				if strings.EqualFold(k, sk) {
					s = true
				}
			}
			x[k] = redact(e, s)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = redact(e, secret)
		}
		return x
	default:
		if secret {
			return "<redacted>"
		}
		return v
	}
}

// MaxAuditList bounds one answer of AuditService/List.
const MaxAuditList = 10_000

// AuditFilter reads a request's filter, with the default and maximum limit.
func AuditFilter(m *unyov1.ListAuditRequest) (store.AuditFilter, error) {
	limit := int(m.GetLimit())
	switch {
	case limit < 0 || limit > MaxAuditList:
		return store.AuditFilter{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("limit: must be between 1 and %d, got %d", MaxAuditList, limit))
	case limit == 0:
		limit = 100
	}
	f := store.AuditFilter{Who: m.GetWho(), Kind: m.GetKind(), Limit: limit}
	if m.GetSince() != nil {
		f.Since = m.GetSince().AsTime()
	}
	return f, nil
}

// AuditService answers a cluster's own audit log.
type AuditService struct {
	Store store.Audit
	// Cluster is this cluster's name; a request for another cluster is empty.
	Cluster string
}

func (s *AuditService) ListAudit(ctx context.Context, req *connect.Request[unyov1.ListAuditRequest]) (*connect.Response[unyov1.ListAuditResponse], error) {
	if c := req.Msg.GetCluster(); c != "" && c != s.Cluster {
		return connect.NewResponse(&unyov1.ListAuditResponse{}), nil
	}
	f, err := AuditFilter(req.Msg)
	if err != nil {
		return nil, err
	}
	recs, err := s.Store.ListAudit(ctx, f)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list audit records: %w", err))
	}
	return connect.NewResponse(&unyov1.ListAuditResponse{Records: recs}), nil
}

// Prune removes audit records older than retention; for a periodic loop.
func Prune(ctx context.Context, st store.Audit, retention time.Duration, now time.Time, log *slog.Logger) {
	if retention <= 0 {
		retention = DefaultAuditRetention
	}
	n, err := st.PruneAudit(ctx, now.Add(-retention))
	switch {
	case err != nil && ctx.Err() == nil:
		log.Warn("pruning the audit log failed", "err", err)
	case n > 0:
		log.Debug("pruned the audit log", "removed", n, "retention", retention)
	}
}
