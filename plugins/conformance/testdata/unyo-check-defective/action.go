package main

// The action: each run sends one GET to the configured URL, after
// sleeping params.sleep. Outcomes are remembered by idempotency key, and a
// key in flight is joined, not run again.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// replaysByRerunning: a key repeated after its run ended runs the action
// again and still answers replayed=true, which only its effects show.
const replaysByRerunning = "replays-by-rerunning"

const actionConfigSchema = `{"type":"object","properties":{"url":{"type":"string"}},"required":["url"],"additionalProperties":false}`

// errCancelled is the cause of a run's context that Cancel ended.
var errCancelled = errors.New("cancelled by the host")

// actionConfig is the URL of an action config.
func actionConfig(cfg *structpb.Struct) (string, error) {
	url := cfg.GetFields()["url"].GetStringValue()
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return "", status.Errorf(codes.InvalidArgument, "config.url: must be an http or https URL, got %q", url)
	}
	return url, nil
}

type actionServer struct {
	pluginv1.UnimplementedActionServer
	p      *server
	client http.Client
	mu     sync.Mutex
	runs   map[string]*actionRun // by idempotency key
}

// actionRun is one run of a key: in flight until done is closed.
type actionRun struct {
	done    chan struct{}
	outcome *pluginv1.Outcome
	cancel  context.CancelCauseFunc
}

func (s *actionServer) url() (string, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.url == "" {
		return "", status.Error(codes.FailedPrecondition, "not configured")
	}
	return s.p.url, nil
}

func (s *actionServer) Execute(req *pluginv1.ExecuteRequest, st pluginv1.Action_ExecuteServer) error {
	url, err := s.url()
	if err != nil {
		return err
	}
	key := req.GetIdempotencyKey()
	if key == "" {
		return status.Error(codes.InvalidArgument, "idempotency_key: required")
	}
	sleep, err := time.ParseDuration(or(req.GetParams().GetFields()["sleep"].GetStringValue(), "0s"))
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "params.sleep: %v", err)
	}
	send := func(o *pluginv1.Outcome) error {
		return st.Send(&pluginv1.ExecuteResponse{Event: &pluginv1.ExecuteResponse_Outcome{Outcome: o}})
	}
	if req.GetDryRun() {
		return send(&pluginv1.Outcome{Status: pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED, Message: "would send GET " + url})
	}
	s.mu.Lock()
	if r, ok := s.runs[key]; ok {
		s.mu.Unlock()
		finished := false
		select {
		case <-r.done:
			finished = true
		default:
		}
		select {
		case <-r.done:
		case <-st.Context().Done():
			return status.FromContextError(st.Context().Err()).Err()
		}
		// Joining a run in flight reruns nothing even here: the defect is
		// in replaying a remembered outcome.
		if finished && s.p.defect == replaysByRerunning {
			_ = s.act(st.Context(), url)
		}
		o := proto.Clone(r.outcome).(*pluginv1.Outcome)
		o.Replayed = true
		return send(o)
	}
	budget := req.GetTimeout().AsDuration()
	if budget <= 0 {
		budget = time.Minute
	}
	tctx, tcancel := context.WithTimeout(st.Context(), budget)
	defer tcancel()
	ctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	r := &actionRun{done: make(chan struct{}), cancel: cancel}
	if s.runs == nil {
		s.runs = map[string]*actionRun{}
	}
	s.runs[key] = r
	s.mu.Unlock()

	began := time.Now()
	o := &pluginv1.Outcome{Status: pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED, Message: "sent GET " + url}
	t := time.NewTimer(sleep)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		if err := s.act(ctx, url); err != nil {
			o.Status, o.Message = pluginv1.OutcomeStatus_OUTCOME_STATUS_RETRYABLE, err.Error()
		}
	}
	switch {
	case context.Cause(ctx) == errCancelled:
		o.Status, o.Message = pluginv1.OutcomeStatus_OUTCOME_STATUS_CANCELLED, "cancelled before acting"
	case st.Context().Err() != nil:
		// The host is gone: nothing was done, so nothing is remembered.
		s.forget(key, r, o)
		return status.FromContextError(st.Context().Err()).Err()
	case ctx.Err() != nil:
		o.Status, o.Message = pluginv1.OutcomeStatus_OUTCOME_STATUS_TIMED_OUT, fmt.Sprintf("not done within %s", budget)
	}
	o.Duration = durationpb.New(time.Since(began))
	if o.Status != pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED {
		// Only what was done is remembered: a retry may try again.
		s.forget(key, r, o)
	} else {
		r.outcome = o
		close(r.done)
	}
	return send(o)
}

// forget ends run r of key with outcome o and drops it, so that the key
// can run again.
func (s *actionServer) forget(key string, r *actionRun, o *pluginv1.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.outcome = o
	close(r.done)
	delete(s.runs, key)
}

// act is the side effect: one GET.
func (s *actionServer) act(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (s *actionServer) Cancel(_ context.Context, req *pluginv1.CancelRequest) (*pluginv1.CancelResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[req.GetIdempotencyKey()]
	if !ok {
		return &pluginv1.CancelResponse{}, nil
	}
	select {
	case <-r.done:
		return &pluginv1.CancelResponse{}, nil
	default:
		r.cancel(errCancelled)
		return &pluginv1.CancelResponse{Found: true}, nil
	}
}
