package conformance

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

var checkStatuses = map[string]pluginv1.CheckStatus{
	"ok": pluginv1.CheckStatus_CHECK_STATUS_OK, "warning": pluginv1.CheckStatus_CHECK_STATUS_WARNING,
	"critical": pluginv1.CheckStatus_CHECK_STATUS_CRITICAL, "unknown": pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN,
}

func checkCases() []testCase {
	k := pluginv1.Kind_KIND_CHECK
	cs := []testCase{}
	for _, s := range []string{"ok", "warning", "critical", "unknown"} {
		cs = append(cs, testCase{name: "check/status_" + s, kind: k, run: func(c *C) { caseCheckStatus(c, s) }})
	}
	return append(cs,
		testCase{name: "check/invalid_target", kind: k, run: caseCheckInvalid},
		testCase{name: "check/timeout_within_budget", kind: k, run: caseCheckTimeout},
		testCase{name: "check/no_zombie_children", kind: k, run: caseCheckZombies},
		testCase{name: "check/concurrent_runs_do_not_mix", kind: k, run: caseCheckConcurrent},
		testCase{name: "check/stream_runs_do_not_mix", kind: k, run: caseCheckStream},
		testCase{name: "check/stream_survives_bad_request", kind: k, run: caseCheckStreamBadRequest},
		testCase{name: "check/output_bounded", kind: k, run: caseCheckOutputBounded},
		testCase{name: "check/cancel", kind: k, run: caseCheckCancel},
	)
}

func (c *C) runCheck(ctx context.Context, inst *instance, target map[string]any, timeout time.Duration) (*pluginv1.CheckResult, error) {
	r, err := inst.conn.Check.Run(ctx, &pluginv1.RunRequest{Target: c.mustStruct(target), Timeout: durationpb.New(timeout), CheckName: "conformance"})
	c.checkBounds(r.GetResult())
	return r.GetResult(), err
}

// maxCheckOutput is the protocol's bound on CheckResult.output.
const maxCheckOutput = 64 << 10

// checkBounds holds every result to the protocol's output bound.
func (c *C) checkBounds(r *pluginv1.CheckResult) {
	if n := len(r.GetOutput()); n > maxCheckOutput {
		c.Errorf("output is %d bytes, over the protocol's 64 KiB (%d bytes): cut it at a character boundary and set output_truncated", n, maxCheckOutput)
	}
	if !utf8.ValidString(r.GetOutput()) {
		c.Errorf("output is not valid UTF-8")
	}
}

// caseCheckOutputBounded: output longer than 64 KiB comes cut, and says so.
func caseCheckOutputBounded(c *C) {
	if c.fx.Check.Large == nil {
		c.needFixture("check.large")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	r, err := c.runCheck(ctx, inst, c.fx.Check.Large, 5*time.Second)
	if err != nil {
		c.Fatalf("Run: %v", err)
	}
	if !r.GetOutputTruncated() {
		c.Errorf("a %d-byte output of the large target does not set output_truncated", len(r.GetOutput()))
	}
}

// caseCheckStreamBadRequest: one unusable request on the shared stream is
// answered with an error; the stream, which carries every check of the
// plugin, goes on.
func caseCheckStreamBadRequest(c *C) {
	if c.fx.Check.Invalid == nil {
		c.needFixture("check.invalid")
	}
	if len(c.fx.Check.Statuses) == 0 {
		c.needFixture("check.statuses")
	}
	var good map[string]any
	for _, t := range c.fx.Check.Statuses {
		good = t
		break
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	st, err := inst.conn.Check.RunStream(ctx)
	if err != nil {
		c.Fatalf("RunStream: %v", err)
	}
	defer func() { _ = st.CloseSend() }()
	for _, req := range []struct {
		id     string
		target map[string]any
	}{{"bad", c.fx.Check.Invalid}, {"good", good}} {
		// A Send to an ended stream fails with io.EOF; Recv then says why.
		_ = st.Send(&pluginv1.RunStreamRequest{RequestId: req.id, Run: &pluginv1.RunRequest{Target: c.mustStruct(req.target), Timeout: durationpb.New(5 * time.Second)}})
		r, err := st.Recv()
		if err != nil {
			c.Fatalf("the plugin ended the whole RunStream after the %s request (%v): an unusable request must be answered with RunStreamResponse.error, the stream carries every check of the plugin", req.id, err)
		}
		c.checkBounds(r.GetResult())
		switch {
		case r.GetRequestId() != req.id:
			c.Errorf("answer for %q, want %q", r.GetRequestId(), req.id)
		case req.id == "bad" && r.GetError() == "":
			c.Errorf("the invalid target's request was answered without error: %v", r)
		case req.id == "good" && (r.GetError() != "" || r.GetResult() == nil):
			c.Errorf("the valid target after an invalid one: %v", r)
		}
	}
}

func caseCheckStatus(c *C, name string) {
	target, ok := c.fx.Check.Statuses[name]
	if !ok {
		c.needFixture("check.statuses." + name)
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	r, err := c.runCheck(ctx, inst, target, 5*time.Second)
	if err != nil {
		c.Fatalf("Run: %v", err)
	}
	if r.GetStatus() != checkStatuses[name] {
		c.Errorf("status %v, want %v (output %q)", r.GetStatus(), checkStatuses[name], r.GetOutput())
	}
	if r.GetTimedOut() || r.GetCancelled() {
		c.Errorf("result says timed_out=%v cancelled=%v", r.GetTimedOut(), r.GetCancelled())
	}
	if r.GetStarted() == nil || r.GetDuration() == nil {
		c.Errorf("result lacks started or duration")
	}
}

func caseCheckInvalid(c *C) {
	if c.fx.Check.Invalid == nil {
		c.needFixture("check.invalid")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	if _, err := c.runCheck(ctx, inst, c.fx.Check.Invalid, 5*time.Second); status.Code(err) != codes.InvalidArgument {
		c.Errorf("invalid target: got %v, want INVALID_ARGUMENT", err)
	}
}

func caseCheckTimeout(c *C) {
	if c.fx.Check.Slow == nil {
		c.needFixture("check.slow")
	}
	const budget = 300 * time.Millisecond
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	began := time.Now()
	r, err := c.runCheck(ctx, inst, c.fx.Check.Slow, budget)
	took := time.Since(began)
	if err != nil {
		c.Fatalf("Run past its budget must give a result, got %v", err)
	}
	if r.GetStatus() != pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN || !r.GetTimedOut() {
		c.Errorf("past its budget: status %v timed_out %v, want UNKNOWN and timed_out", r.GetStatus(), r.GetTimedOut())
	}
	if took > budget+500*time.Millisecond {
		c.Errorf("answered %s after a %s budget", took.Round(time.Millisecond), budget)
	}
	c.log("answered after %s", took.Round(time.Millisecond))
}

// caseCheckZombies: after checks, including timed-out and cancelled ones,
// the plugin has no children left: neither zombies it did not reap nor
// processes still running that a cut-short check did not kill.
func caseCheckZombies(c *C) {
	c.needBinary("it inspects the plugin process's children")
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	ran := 0
	for _, t := range c.fx.Check.Statuses {
		for range 3 {
			_, _ = c.runCheck(ctx, inst, t, 5*time.Second)
			ran++
		}
	}
	if c.fx.Check.Slow != nil {
		// One timed out by its budget, one cancelled by the host.
		_, _ = c.runCheck(ctx, inst, c.fx.Check.Slow, 200*time.Millisecond)
		cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _ = c.runCheck(cctx, inst, c.fx.Check.Slow, 10*time.Second)
		ccancel()
		ran += 2
	}
	if ran == 0 {
		c.needFixture("check.statuses")
	}
	// A child may be killed or reaped a moment after the answer.
	deadline := time.Now().Add(2 * time.Second)
	for {
		z, err := zombies(inst.pid)
		if err != nil {
			c.Skipf("%v", err)
		}
		live := liveChildren(inst.pid)
		if len(z) == 0 && len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if len(live) > 0 {
				// They would outlive the case: the harness ends them.
				for _, pid := range live {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				c.Errorf("plugin left %d child processes still running after %d checks, timed-out and cancelled ones among them (%s): a check cut short must kill its children",
					len(live), ran, describePIDs(live))
			}
			if len(z) > 0 {
				c.Errorf("plugin left %d zombie children after %d checks (pids %v)", len(z), ran, z)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mixTargets returns targets with distinct expected statuses.
func (c *C) mixTargets() map[pluginv1.CheckStatus]map[string]any {
	out := map[pluginv1.CheckStatus]map[string]any{}
	for name, t := range c.fx.Check.Statuses {
		out[checkStatuses[name]] = t
	}
	if len(out) < 2 {
		c.needFixture("check.statuses (two statuses at least)")
	}
	return out
}

func caseCheckConcurrent(c *C) {
	targets := c.mixTargets()
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 32 {
		for want, t := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.runCheck(ctx, inst, t, 10*time.Second)
				if err != nil {
					c.Errorf("run %d: %v", i, err)
				} else if r.GetStatus() != want {
					c.Errorf("run %d: status %v, want %v: results mixed up", i, r.GetStatus(), want)
				}
			}()
		}
	}
	wg.Wait()
}

func caseCheckStream(c *C) {
	targets := c.mixTargets()
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	st, err := inst.conn.Check.RunStream(ctx)
	if err != nil {
		c.Fatalf("RunStream: %v", err)
	}
	want := map[string]pluginv1.CheckStatus{}
	var statuses []pluginv1.CheckStatus
	for s := range targets {
		statuses = append(statuses, s)
	}
	sort.Slice(statuses, func(i, j int) bool { return statuses[i] < statuses[j] })
	for i := range 40 {
		s := statuses[i%len(statuses)]
		id := fmt.Sprintf("r%d", i)
		want[id] = s
		err := st.Send(&pluginv1.RunStreamRequest{RequestId: id, Run: &pluginv1.RunRequest{Target: c.mustStruct(targets[s]), Timeout: durationpb.New(10 * time.Second)}})
		if err != nil {
			c.Fatalf("send %s: %v", id, err)
		}
	}
	if err := st.CloseSend(); err != nil {
		c.Fatalf("CloseSend: %v", err)
	}
	for range len(want) {
		r, err := st.Recv()
		if err != nil {
			c.Fatalf("stream ended with %d answers missing: %v", len(want), err)
		}
		c.checkBounds(r.GetResult())
		w, ok := want[r.GetRequestId()]
		switch {
		case !ok:
			c.Errorf("answer for unknown or repeated request id %q", r.GetRequestId())
		case r.GetError() != "":
			c.Errorf("request %s: %s", r.GetRequestId(), r.GetError())

		case r.GetResult().GetStatus() != w:
			c.Errorf("request %s: status %v, want %v: results mixed up", r.GetRequestId(), r.GetResult().GetStatus(), w)
		}
		delete(want, r.GetRequestId())
	}
}

func caseCheckCancel(c *C) {
	if c.fx.Check.Slow == nil {
		c.needFixture("check.slow")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(20 * time.Second)
	defer cancel()

	// Unary: the host cancels the call.
	rctx, rcancel := context.WithCancel(ctx)
	t := time.AfterFunc(200*time.Millisecond, rcancel)
	defer t.Stop()
	began := time.Now()
	_, err := c.runCheck(rctx, inst, c.fx.Check.Slow, 10*time.Second)
	if status.Code(err) != codes.Canceled {
		c.Errorf("cancelled Run: got %v, want CANCELLED", err)
	}
	if took := time.Since(began); took > 1200*time.Millisecond {
		c.Errorf("cancelled Run returned after %s", took.Round(time.Millisecond))
	}

	// Stream: a cancel request for one run.
	st, err := inst.conn.Check.RunStream(ctx)
	if err != nil {
		c.Fatalf("RunStream: %v", err)
	}
	defer func() { _ = st.CloseSend() }()
	if err := st.Send(&pluginv1.RunStreamRequest{RequestId: "slow", Run: &pluginv1.RunRequest{Target: c.mustStruct(c.fx.Check.Slow), Timeout: durationpb.New(10 * time.Second)}}); err != nil {
		c.Fatalf("send: %v", err)
	}
	time.AfterFunc(200*time.Millisecond, func() { _ = st.Send(&pluginv1.RunStreamRequest{RequestId: "slow", Cancel: true}) })
	began = time.Now()
	r, err := st.Recv()
	if err != nil {
		c.Fatalf("stream: %v", err)
	}
	if !r.GetResult().GetCancelled() || r.GetResult().GetStatus() != pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN {
		c.Errorf("cancelled stream run: %v, want UNKNOWN and cancelled", r)
	}
	if took := time.Since(began); took > 1200*time.Millisecond {
		c.Errorf("cancelled stream run answered after %s", took.Round(time.Millisecond))
	}
}
