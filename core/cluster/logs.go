package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/store"
)

// maxEntriesPerWrite bounds one request, like maxResultsPerReport.
const maxEntriesPerWrite = 100000

// logsService stores agents' log lines in the cluster's log store and
// answers operators' queries on it.
type logsService struct{ c *Cluster }

func (s *logsService) store() (logstore.Store, error) {
	if s.c.opts.Logs == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("cluster %q keeps no logs: its logs.store is none", s.c.opts.Name))
	}
	return s.c.opts.Logs, nil
}

// WriteLogs stores the lines it has not stored before. Positions are
// recorded after the lines are written: if recording fails the agent resends
// and lines may be stored twice, which beats losing them.
func (s *logsService) WriteLogs(ctx context.Context, req *connect.Request[unyov1.WriteLogsRequest]) (*connect.Response[unyov1.WriteLogsResponse], error) {
	node := req.Msg.GetNode()
	if _, err := s.c.agentNode(ctx, node); err != nil {
		return nil, err
	}
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	in := req.Msg.GetEntries()
	if len(in) > maxEntriesPerWrite {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("entries: %d in one request, at most %d", len(in), maxEntriesPerWrite))
	}
	// The agent sends one node's lines in order from one sender, so reading
	// the positions, writing and recording them need no lock across replicas.
	pos, err := s.c.store.GetLogPositions(ctx, node)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("read log positions of node %q: %w", node, err))
	}
	changed := map[string]store.LogPosition{}
	entries := make([]logstore.Entry, 0, len(in))
	resp := &unyov1.WriteLogsResponse{}
	for _, e := range in {
		if id := e.GetFileId(); id != "" {
			p, seen := pos[id]
			if seen && (e.GetSequence() <= p.Sequence || (e.GetOffset() <= p.Offset && e.GetOffset() != 0)) {
				resp.Duplicates++
				continue
			}
			p = store.LogPosition{Sequence: e.GetSequence(), Offset: e.GetOffset()}
			pos[id], changed[id] = p, p
		}
		entries = append(entries, convert.EntryFromProto(e, node, s.c.opts.Name))
	}
	if len(entries) > 0 && s.c.opts.TelemetryWAL != nil {
		// The WAL holds the lines as the store will, and the positions, so
		// that replay neither doubles the lines nor lets a resend double them.
		entries = prepareLines(entries)
		rec, err := logsRecord(node, changed, entries)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("encode log lines for the telemetry WAL: %w", err))
		}
		if err := s.c.logTelemetry(ctx, "log lines", rec); err != nil {
			return nil, err
		}
	}
	if len(entries) > 0 {
		err := db.Write(ctx, entries)
		switch {
		case errors.Is(err, logstore.ErrRejected):
			// The rest was written; resending would duplicate it.
			s.c.log.Warn("log lines older than the retention were not stored", "node", node, "err", err)
			resp.Rejected = int32(rejectedCount(err))
		case err != nil:
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("store %d log lines from node %q: %w", len(entries), node, err))
		}
	}
	if err := s.c.store.PutLogPositions(ctx, node, changed); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("record log positions of node %q: %w", node, err))
	}
	resp.Accepted = int32(len(entries)) - resp.Rejected
	return connect.NewResponse(resp), nil
}

// rejectedCount reads the count logstore.RejectedError puts after
// ErrRejected's text; 0 if it cannot, since the count only informs the
// agent's log.
func rejectedCount(err error) int {
	msg := err.Error()
	i := strings.Index(msg, logstore.ErrRejected.Error()+": ")
	if i < 0 {
		return 0
	}
	var n int
	_, _ = fmt.Sscanf(msg[i+len(logstore.ErrRejected.Error())+2:], "%d", &n)
	return n
}

func (s *logsService) Query(ctx context.Context, req *connect.Request[unyov1.QueryLogsRequest]) (*connect.Response[unyov1.QueryLogsResponse], error) {
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	entries, err := db.Query(ctx, convert.QueryFromProto(req.Msg.GetFilter()))
	if err != nil {
		return nil, logError(err)
	}
	return connect.NewResponse(&unyov1.QueryLogsResponse{Entries: convert.EntriesToProto(entries)}), nil
}

func (s *logsService) Stats(ctx context.Context, req *connect.Request[unyov1.LogStatsRequest]) (*connect.Response[unyov1.LogStatsResponse], error) {
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	by, interval := req.Msg.GetBy(), req.Msg.GetInterval().AsDuration()
	if err := logstore.CheckStats(by, interval); err != nil {
		return nil, logError(err)
	}
	buckets, err := db.Stats(ctx, convert.QueryFromProto(req.Msg.GetFilter()), by, interval)
	if err != nil {
		return nil, logError(err)
	}
	return connect.NewResponse(&unyov1.LogStatsResponse{By: by, Interval: durationpb.New(interval), Buckets: convert.BucketsToProto(buckets)}), nil
}

func (s *logsService) Trace(ctx context.Context, req *connect.Request[unyov1.TraceLogsRequest]) (*connect.Response[unyov1.TraceLogsResponse], error) {
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	if err := logstore.CheckTraceID(req.Msg.GetTraceId()); err != nil {
		return nil, logError(err)
	}
	entries, err := db.Trace(ctx, req.Msg.GetTraceId(), convert.Time(req.Msg.GetSince()), convert.Time(req.Msg.GetUntil()))
	if err != nil {
		return nil, logError(err)
	}
	return connect.NewResponse(&unyov1.TraceLogsResponse{Entries: convert.EntriesToProto(entries)}), nil
}

func logError(err error) error {
	switch {
	case errors.Is(err, logstore.ErrInvalidQuery):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, logstore.ErrTooLarge):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w; narrow the time range or the filters", err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("log store: %w", err))
}
