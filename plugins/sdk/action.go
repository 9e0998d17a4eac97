package sdk

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

const (
	// DefaultActionTimeout applies when a request carries none.
	DefaultActionTimeout = 60 * time.Second
	// actionLateMargin is how long the SDK waits after cancelling an action
	// for the author's code to return and say what it managed.
	actionLateMargin = time.Second
)

type actionServer struct {
	pluginv1.UnimplementedActionServer
	rt *runtime
	p  ActionPlugin
}

func (s *actionServer) Execute(req *pluginv1.ExecuteRequest, stream pluginv1.Action_ExecuteServer) error {
	ctx := stream.Context()
	key := req.GetIdempotencyKey()
	if key == "" {
		return s.rt.toStatus(Invalid("idempotency_key", "is required"))
	}
	var sendMu sync.Mutex
	progress := func(msg string) {
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = stream.Send(&pluginv1.ExecuteResponse{Event: &pluginv1.ExecuteResponse_Progress{
			Progress: &pluginv1.Progress{Message: msg, At: timestamppb.Now()}}})
	}
	finish := func(o *pluginv1.Outcome) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(&pluginv1.ExecuteResponse{Event: &pluginv1.ExecuteResponse_Outcome{Outcome: o}})
	}

	if req.GetDryRun() {
		// Dry runs have no effect to protect, so they bypass the table.
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		return finish(s.execute(actx, req, progress))
	}

	e, first := s.rt.actions.claim(key)
	if !first {
		select {
		case <-e.done:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		o := cloneOutcome(e.outcome)
		o.Replayed = true
		return finish(o)
	}
	actx, cancel := context.WithCancel(ctx)
	s.rt.actions.setCancel(e, cancel)
	o := s.execute(actx, req, progress)
	cancel()
	s.rt.actions.complete(e, o)
	return finish(cloneOutcome(o))
}

// execute runs the author's code under the timeout and turns an early end
// of ctx into CANCELLED or TIMED_OUT whatever the code reports.
func (s *actionServer) execute(ctx context.Context, req *pluginv1.ExecuteRequest, progress func(string)) *pluginv1.Outcome {
	timeout := req.GetTimeout().AsDuration()
	if timeout <= 0 {
		timeout = DefaultActionTimeout
	}
	started := time.Now()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan Outcome, 1)
	go func() {
		var o Outcome
		defer func() {
			if r := recover(); r != nil {
				o = Outcome{Status: Failed, Message: fmt.Sprintf("action panicked: %v", r)}
			}
			done <- o
		}()
		o = s.p.Execute(tctx, ActionRequest{Key: req.GetIdempotencyKey(), DryRun: req.GetDryRun(),
			Params: req.GetParams().AsMap(), Payload: req.GetPayload(), Timeout: timeout}, progress)
	}()
	var o Outcome
	got := false
	select {
	case o = <-done:
		got = true
	case <-tctx.Done():
		t := time.NewTimer(actionLateMargin)
		select {
		case o = <-done:
			got = true
		case <-t.C:
		}
		t.Stop()
	}
	out := &pluginv1.Outcome{Status: o.Status, Message: o.Message}
	switch {
	case tctx.Err() != nil && ctx.Err() != nil:
		out.Status, out.Message = Cancelled, joinMsg("cancelled", o.Message, got)
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		out.Status, out.Message = TimedOut, joinMsg(fmt.Sprintf("timed out after %s", timeout), o.Message, got)
	case out.Status == pluginv1.OutcomeStatus_OUTCOME_STATUS_UNSPECIFIED:
		out.Status, out.Message = Failed, joinMsg("plugin returned no outcome status", o.Message, true)
	}
	if out.Status == Retryable && o.RetryAfter > 0 {
		out.RetryAfter = durationpb.New(o.RetryAfter)
	}
	out.Duration = durationpb.New(time.Since(started))
	return out
}

func joinMsg(head, tail string, have bool) string {
	if !have || tail == "" {
		return head
	}
	return head + ": " + tail
}

func (s *actionServer) Cancel(_ context.Context, req *pluginv1.CancelRequest) (*pluginv1.CancelResponse, error) {
	return &pluginv1.CancelResponse{Found: s.rt.actions.cancel(req.GetIdempotencyKey())}, nil
}

func cloneOutcome(o *pluginv1.Outcome) *pluginv1.Outcome {
	return proto.Clone(o).(*pluginv1.Outcome)
}

// actionTable remembers idempotency keys: running ones so that a duplicate
// waits, finished ones so that a duplicate replays. Bounded by count and age.
type actionTable struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	byKey map[string]*list.Element
	order *list.List // of *actionEntry, oldest first
}

type actionEntry struct {
	key      string
	done     chan struct{}
	outcome  *pluginv1.Outcome
	cancelFn context.CancelFunc
	finished time.Time
}

func newActionTable(max int, ttl time.Duration) *actionTable {
	return &actionTable{max: max, ttl: ttl, byKey: map[string]*list.Element{}, order: list.New()}
}

// claim returns the key's entry and whether the caller must run it.
func (t *actionTable) claim(key string) (*actionEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evict()
	if el, ok := t.byKey[key]; ok {
		return el.Value.(*actionEntry), false
	}
	e := &actionEntry{key: key, done: make(chan struct{})}
	t.byKey[key] = t.order.PushBack(e)
	return e, true
}

func (t *actionTable) setCancel(e *actionEntry, c context.CancelFunc) {
	t.mu.Lock()
	e.cancelFn = c
	t.mu.Unlock()
}

func (t *actionTable) complete(e *actionEntry, o *pluginv1.Outcome) {
	t.mu.Lock()
	e.outcome, e.cancelFn, e.finished = o, nil, time.Now()
	t.mu.Unlock()
	close(e.done)
}

func (t *actionTable) cancel(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byKey[key]
	if !ok {
		return false
	}
	e := el.Value.(*actionEntry)
	if e.cancelFn == nil {
		return false
	}
	e.cancelFn()
	return true
}

// evict drops finished entries that are too old or over the bound; running
// ones are never dropped, so a duplicate can always find them.
func (t *actionTable) evict() {
	now := time.Now()
	for el := t.order.Front(); el != nil; {
		next := el.Next()
		e := el.Value.(*actionEntry)
		over := t.order.Len() > t.max
		if e.outcome != nil && (over || now.Sub(e.finished) > t.ttl) {
			t.order.Remove(el)
			delete(t.byKey, e.key)
		} else if !over {
			break
		}
		el = next
	}
}
