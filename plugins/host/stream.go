package host

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// checkStream multiplexes the check runs sent to one plugin instance over
// one long-lived Check.RunStream: a unary Run per check costs a gRPC call
// setup each, the stream costs one message each way. Answers come back in
// completion order, matched to their caller by request id. The stream dies
// with its instance (or on a transport error); the next run then opens a
// new one, on the restarted instance if the supervisor restarted it.
type checkStream struct {
	p    *Plugin
	inst *instance
	// reqs feeds the one goroutine that may call Send (gRPC streams allow
	// one sender at a time); callers give up on it when their ctx ends, so
	// a stalled plugin cannot pile them up behind a lock.
	reqs chan *pluginv1.RunStreamRequest
	// done is closed when the stream has ended; err says why.
	done chan struct{}
	err  error

	mu      sync.Mutex
	pending map[string]chan *pluginv1.RunStreamResponse
	next    atomic.Uint64
}

// errNoStream: the plugin does not serve RunStream (it answered
// UNIMPLEMENTED); its checks go through Run instead.
var errNoStream = errors.New("the plugin does not serve Check.RunStream")

// stream returns inst's open check stream, opening one when there is none
// or the last one ended. ok is false when the plugin does not stream.
func (p *Plugin) stream(inst *instance) (*checkStream, bool) {
	inst.streamMu.Lock()
	defer inst.streamMu.Unlock()
	if inst.noStream {
		return nil, false
	}
	if s := inst.stream; s != nil {
		select {
		case <-s.done:
		default:
			return s, true
		}
	}
	s := &checkStream{p: p, inst: inst, reqs: make(chan *pluginv1.RunStreamRequest, 64),
		done: make(chan struct{}), pending: map[string]chan *pluginv1.RunStreamResponse{}}
	// The stream lives as long as the instance, not as any one caller.
	ctx, cancel := context.WithCancel(p.h.ctx)
	st, err := inst.conn.Check.RunStream(ctx)
	if err != nil {
		cancel()
		s.err = err
		close(s.done)
		return s, true
	}
	inst.stream = s
	go func() {
		select {
		case <-inst.conn.Done:
		case <-s.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	go func() {
		for {
			select {
			case r := <-s.reqs:
				if err := st.Send(r); err != nil {
					// Recv reports why the stream ended.
					return
				}
			case <-s.done:
				return
			}
		}
	}()
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				s.end(err)
				return
			}
			s.mu.Lock()
			ch := s.pending[r.GetRequestId()]
			delete(s.pending, r.GetRequestId())
			s.mu.Unlock()
			if ch != nil { // nil: a run its caller gave up on
				ch <- r
			}
		}
	}()
	return s, true
}

// end records why the stream ended and fails every run still waiting.
func (s *checkStream) end(err error) {
	if status.Code(err) == codes.Unimplemented {
		s.inst.streamMu.Lock()
		s.inst.noStream = true
		s.inst.streamMu.Unlock()
		err = errNoStream
	}
	s.mu.Lock()
	s.err = err
	s.pending = nil
	s.mu.Unlock()
	close(s.done)
}

// run sends one check over the stream and waits for its answer, the
// stream's end or ctx.
func (s *checkStream) run(ctx context.Context, req *pluginv1.RunRequest) (*pluginv1.CheckResult, error) {
	id := strconv.FormatUint(s.next.Add(1), 10)
	ch := make(chan *pluginv1.RunStreamResponse, 1)
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		<-s.done
		return nil, s.err
	}
	s.pending[id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		if s.pending != nil {
			delete(s.pending, id)
		}
		s.mu.Unlock()
	}
	select {
	case s.reqs <- &pluginv1.RunStreamRequest{RequestId: id, Run: req}:
	case <-s.done:
		return nil, s.err
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
	select {
	case r := <-ch:
		if e := r.GetError(); e != "" {
			// What Run would have refused with INVALID_ARGUMENT.
			return nil, status.Error(codes.InvalidArgument, e)
		}
		return r.GetResult(), nil
	case <-s.done:
		return nil, s.err
	case <-ctx.Done():
		forget()
		// Let the plugin stop working on it; its late answer is dropped.
		select {
		case s.reqs <- &pluginv1.RunStreamRequest{RequestId: id, Cancel: true}:
		default:
		}
		return nil, ctx.Err()
	}
}

// Check runs one check through the plugin, over the instance's shared
// check stream, or a unary Run when the plugin does not serve RunStream.
// Errors name the plugin and wrap ErrUnavailable when the plugin died or
// could not be reached; a run whose ctx ends before any answer (not even
// the plugin's own timed_out result) makes the supervisor probe the
// plugin at once, since a plugin that answers nothing may be hung.
func (p *Plugin) Check(ctx context.Context, req *pluginv1.RunRequest) (*pluginv1.CheckResult, error) {
	var res *pluginv1.CheckResult
	err := p.do(ctx, func(ctx context.Context, inst *instance) error {
		if s, ok := p.stream(inst); ok {
			var err error
			res, err = s.run(ctx, req)
			if !errors.Is(err, errNoStream) {
				return err
			}
		}
		r, err := inst.conn.Check.Run(ctx, req)
		res = r.GetResult()
		return err
	})
	if errors.Is(err, context.DeadlineExceeded) {
		p.suspect()
	}
	return res, err
}
