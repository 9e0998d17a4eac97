package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

const (
	// MaxOutput bounds CheckResult.Output, like a command check's output.
	MaxOutput = 64 << 10
	// DefaultCheckTimeout applies when a request carries none.
	DefaultCheckTimeout = 10 * time.Second
	// lateMargin is how long the SDK waits after a deadline for the author's
	// code to return before answering without it.
	lateMargin = 50 * time.Millisecond
	// streamConcurrency bounds the checks one RunStream runs at once.
	streamConcurrency = 64
)

type checkServer struct {
	pluginv1.UnimplementedCheckServer
	rt *runtime
	p  CheckPlugin
}

func (s *checkServer) Run(ctx context.Context, req *pluginv1.RunRequest) (*pluginv1.RunResponse, error) {
	res, err := s.run(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.Cancelled {
		// The host's own deadline is DEADLINE_EXCEEDED, whichever side
		// notices first; only an explicit cancel is CANCELLED.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, status.Errorf(codes.DeadlineExceeded, "check abandoned: the call's deadline passed")
		}
		return nil, status.Errorf(codes.Canceled, "check cancelled by the host")
	}
	return &pluginv1.RunResponse{Result: res}, nil
}

// run runs one check under its timeout. It returns an error only for what
// the protocol says is an error (INVALID_ARGUMENT); everything else,
// including the author's code overrunning the budget, is a result.
func (s *checkServer) run(ctx context.Context, req *pluginv1.RunRequest) (*pluginv1.CheckResult, error) {
	timeout := req.GetTimeout().AsDuration()
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	started := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if req.GetCheckName() != "" {
		cctx = withLog(cctx, Log(ctx).With("check", req.GetCheckName()))
	}
	type answer struct {
		r   CheckResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		defer func() {
			if r := recover(); r != nil {
				a = answer{err: fmt.Errorf("check panicked: %v", r)}
			}
			done <- a
		}()
		a.r, a.err = s.p.Check(cctx, CheckRequest{Name: req.GetCheckName(), Target: req.GetTarget().AsMap(), Timeout: timeout})
	}()

	var a answer
	got := false
	select {
	case a = <-done:
		got = true
	case <-cctx.Done():
		t := time.NewTimer(lateMargin)
		select {
		case a = <-done:
			got = true
		case <-t.C:
		}
		t.Stop()
	}
	res := &pluginv1.CheckResult{Started: timestamppb.New(started)}
	var ce *ConfigError
	if got && errors.As(a.err, &ce) {
		return nil, s.rt.toStatus(a.err)
	}
	switch {
	case cctx.Err() != nil && ctx.Err() != nil:
		res.Status, res.Cancelled = Unknown, true
		res.Output = "UNKNOWN: check cancelled"
	case cctx.Err() != nil:
		// The budget is the host's: whatever the code found after it is
		// not trusted, the host maps timed_out to its timeout_status.
		res.Status, res.TimedOut = Unknown, true
		res.Output = fmt.Sprintf("UNKNOWN: check timed out after %s", timeout)
		if got && a.r.Output != "" {
			res.Output += "\n" + a.r.Output
		}
	case a.err != nil:
		res.Status = Unknown
		res.Output = "UNKNOWN: " + a.err.Error()
	default:
		res.Status, res.Output = a.r.Status, a.r.Output
		if res.Status == pluginv1.CheckStatus_CHECK_STATUS_UNSPECIFIED {
			res.Status = Unknown
		}
		res.Metrics = toMetrics(a.r.Metrics)
	}
	res.Output, res.OutputTruncated = bound(res.Output, MaxOutput)
	res.Duration = durationpb.New(time.Since(started))
	return res, nil
}

func toMetrics(ms []Metric) []*pluginv1.Metric {
	out := make([]*pluginv1.Metric, 0, len(ms))
	for _, m := range ms {
		out = append(out, &pluginv1.Metric{Label: m.Label, Value: m.Value, Unit: m.Unit, Warn: m.Warn, Crit: m.Crit, Min: m.Min, Max: m.Max})
	}
	return out
}

// bound cuts s to at most max bytes at a character boundary.
func bound(s string, max int) (string, bool) {
	if !utf8.ValidString(s) {
		s = toValidUTF8(s)
	}
	if len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

func toValidUTF8(s string) string {
	b := make([]rune, 0, len(s))
	for _, r := range s {
		b = append(b, r)
	}
	return string(b)
}

func (s *checkServer) RunStream(stream pluginv1.Check_RunStreamServer) error {
	ctx := stream.Context()
	var (
		sendMu  sync.Mutex
		mu      sync.Mutex
		cancels = map[string]context.CancelFunc{}
		wg      sync.WaitGroup
		sem     = make(chan struct{}, streamConcurrency)
		sendErr error
	)
	send := func(r *pluginv1.RunStreamResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(r)
		}
	}
	defer func() {
		mu.Lock()
		for _, c := range cancels {
			c()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			// The host has sent everything; answer what is in flight.
			wg.Wait()
			return nil
		}
		if err != nil {
			return err
		}
		id := req.GetRequestId()
		if req.GetCancel() {
			mu.Lock()
			if c := cancels[id]; c != nil {
				c()
			}
			mu.Unlock()
			continue
		}
		mu.Lock()
		_, dup := cancels[id]
		var rctx context.Context
		var cancel context.CancelFunc
		if !dup {
			rctx, cancel = context.WithCancel(ctx)
			cancels[id] = cancel
		}
		mu.Unlock()
		if dup {
			send(&pluginv1.RunStreamResponse{RequestId: id, Error: fmt.Sprintf("request id %q is already in flight on this stream", id)})
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			cancel()
			return status.FromContextError(ctx.Err()).Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := s.run(rctx, req.GetRun())
			mu.Lock()
			delete(cancels, id)
			mu.Unlock()
			cancel()
			out := &pluginv1.RunStreamResponse{RequestId: id, Result: res}
			if err != nil {
				out = &pluginv1.RunStreamResponse{RequestId: id, Error: status.Convert(err).Message()}
			}
			send(out)
		}()
	}
}
