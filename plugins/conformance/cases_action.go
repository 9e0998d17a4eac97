package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

func actionCases() []testCase {
	k := pluginv1.Kind_KIND_ACTION
	return []testCase{
		{name: "action/succeeds", kind: k, run: caseActionSucceeds},
		{name: "action/missing_key_rejected", kind: k, run: caseActionMissingKey},
		{name: "action/dry_run_no_side_effect", kind: k, run: caseActionDryRun},
		{name: "action/idempotent_sequential", kind: k, run: caseActionIdempotentSeq},
		{name: "action/idempotent_concurrent", kind: k, run: caseActionIdempotentConc},
		{name: "action/timeout", kind: k, run: caseActionTimeout},
		{name: "action/cancel", kind: k, run: caseActionCancel},
	}
}

// execute runs an action and returns its one outcome; more than one
// outcome, or none, is an error.
func execute(ctx context.Context, conn *base.Conn, req *pluginv1.ExecuteRequest) (*pluginv1.Outcome, error) {
	st, err := conn.Action.Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	var out *pluginv1.Outcome
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			if out == nil {
				return nil, fmt.Errorf("the stream ended without an outcome")
			}
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if o := r.GetOutcome(); o != nil {
			if out != nil {
				return out, fmt.Errorf("a second outcome %v after %v", o, out)
			}
			out = o
		}
	}
}

func (c *C) actionReq(key string, params map[string]any, timeout time.Duration) *pluginv1.ExecuteRequest {
	return &pluginv1.ExecuteRequest{IdempotencyKey: key, Params: c.mustStruct(params), Timeout: durationpb.New(timeout),
		Payload: []byte(`{"conformance":true}`)}
}

// effects counts the side effects recorded in the fixture's effects file;
// ok is false when there is no such fixture.
// effects counts the action's side effects: lines of the effects file,
// or without one, contacts with the helper servers the fixtures send it
// to. Either is observed, not taken from the plugin's word (replayed).
func (c *C) effects() (int, bool) {
	if c.fx.Action.EffectsFile == "" {
		if c.env.reachesHelpers(c.fx.Config, c.fx.Action.Params) {
			return int(c.env.contacts.Load()), true
		}
		return 0, false
	}
	b, err := os.ReadFile(c.fx.Action.EffectsFile)
	if err != nil {
		return 0, true
	}
	return strings.Count(string(b), "\n"), true
}

func (c *C) needParams() {
	if c.fx.Action.Params == nil {
		c.needFixture("action.params")
	}
}

func caseActionSucceeds(c *C) {
	c.needParams()
	inst := c.start(true)
	ctx, cancel := c.timeout(20 * time.Second)
	defer cancel()
	n0, counted := c.effects()
	o, err := execute(ctx, inst.conn, c.actionReq(c.name, c.fx.Action.Params, 10*time.Second))
	if err != nil {
		c.Fatalf("Execute: %v", err)
	}
	if o.GetStatus() != pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED || o.GetReplayed() {
		c.Errorf("outcome %v, want SUCCEEDED and not replayed", o)
	}
	if n1, _ := c.effects(); counted && n1 != n0+1 {
		c.Errorf("the action acted %d times, want once", n1-n0)
	}
}

func caseActionMissingKey(c *C) {
	c.needParams()
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	if _, err := execute(ctx, inst.conn, c.actionReq("", c.fx.Action.Params, 5*time.Second)); status.Code(err) != codes.InvalidArgument {
		c.Errorf("Execute without idempotency key: got %v, want INVALID_ARGUMENT", err)
	}
}

func caseActionDryRun(c *C) {
	c.needParams()
	n0, counted := c.effects()
	if !counted {
		c.needFixture("action.effects_file")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(20 * time.Second)
	defer cancel()
	req := c.actionReq(c.name, c.fx.Action.Params, 10*time.Second)
	req.DryRun = true
	for range 2 {
		o, err := execute(ctx, inst.conn, req)
		if err != nil {
			c.Fatalf("dry run: %v", err)
		}
		if s := o.GetStatus(); s != pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED && s != pluginv1.OutcomeStatus_OUTCOME_STATUS_SKIPPED {
			c.Errorf("dry run outcome %v, want SUCCEEDED or SKIPPED", o)
		}
		if o.GetReplayed() {
			c.Errorf("dry runs must not be remembered, but the outcome was replayed")
		}
	}
	if n1, _ := c.effects(); n1 != n0 {
		c.Errorf("dry runs acted %d times", n1-n0)
	}
	// The dry runs must not have claimed the key either.
	req.DryRun = false
	if o, err := execute(ctx, inst.conn, req); err != nil || o.GetReplayed() {
		c.Errorf("real run after dry runs with the same key: %v %v, want a fresh run", o, err)
	}
}

func caseActionIdempotentSeq(c *C) {
	c.needParams()
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	n0, counted := c.effects()
	req := c.actionReq(c.name, c.fx.Action.Params, 10*time.Second)
	first, err := execute(ctx, inst.conn, req)
	if err != nil {
		c.Fatalf("first Execute: %v", err)
	}
	second, err := execute(ctx, inst.conn, req)
	if err != nil {
		c.Fatalf("second Execute: %v", err)
	}
	if !second.GetReplayed() || second.GetStatus() != first.GetStatus() {
		c.Errorf("second Execute with the same key: %v, want a replay of %v", second, first)
	}
	if n1, _ := c.effects(); counted && n1 != n0+1 {
		c.Errorf("two Executes with one key acted %d times, want once", n1-n0)
	}
}

func caseActionIdempotentConc(c *C) {
	c.needParams()
	inst := c.start(true)
	ctx, cancel := c.timeout(30 * time.Second)
	defer cancel()
	n0, counted := c.effects()
	req := c.actionReq(c.name, c.fx.Action.Params, 10*time.Second)
	const n = 8
	outs := make([]*pluginv1.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := execute(ctx, inst.conn, req)
			if err != nil {
				c.Errorf("Execute %d: %v", i, err)
			}
			outs[i] = o
		}()
	}
	wg.Wait()
	fresh := 0
	for _, o := range outs {
		if o != nil && !o.GetReplayed() {
			fresh++
		}
		if o != nil && outs[0] != nil && o.GetStatus() != outs[0].GetStatus() {
			c.Errorf("concurrent Executes with one key ended differently: %v and %v", o, outs[0])
		}
	}
	if fresh != 1 {
		c.Errorf("%d of %d concurrent Executes with one key were not replays, want exactly 1", fresh, n)
	}
	if n1, _ := c.effects(); counted && n1 != n0+1 {
		c.Errorf("%d concurrent Executes with one key acted %d times, want once", n, n1-n0)
	}
}

func caseActionTimeout(c *C) {
	if c.fx.Action.Slow == nil {
		c.needFixture("action.slow")
	}
	const budget = 300 * time.Millisecond
	inst := c.start(true)
	ctx, cancel := c.timeout(20 * time.Second)
	defer cancel()
	began := time.Now()
	o, err := execute(ctx, inst.conn, c.actionReq(c.name, c.fx.Action.Slow, budget))
	took := time.Since(began)
	if err != nil {
		c.Fatalf("Execute past its budget must give an outcome, got %v", err)
	}
	if o.GetStatus() != pluginv1.OutcomeStatus_OUTCOME_STATUS_TIMED_OUT {
		c.Errorf("outcome %v, want TIMED_OUT", o)
	}
	// The SDK gives the author's code a second to say what it managed.
	if took > budget+1500*time.Millisecond {
		c.Errorf("answered %s after a %s budget", took.Round(time.Millisecond), budget)
	}
	c.log("answered after %s", took.Round(time.Millisecond))
	c.noEffectsAfter("TIMED_OUT")
}

// afterEffectWindow is how long the harness watches the effects file
// after a timed-out or cancelled action's outcome.
const afterEffectWindow = time.Second

// noEffectsAfter fails the case when the action acts after its outcome
// said it stopped: the host has moved on (retried, given up) by then.
func (c *C) noEffectsAfter(outcome string) {
	n1, counted := c.effects()
	if !counted {
		c.log("no action.effects_file fixture: effects after %s not observed", outcome)
		return
	}
	deadline := time.Now().Add(afterEffectWindow)
	for time.Now().Before(deadline) {
		if n, _ := c.effects(); n != n1 {
			c.Errorf("the action acted after it reported %s: the effects file grew from %d to %d lines; an action must stop acting when its context ends", outcome, n1, n)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func caseActionCancel(c *C) {
	if c.fx.Action.Slow == nil {
		c.needFixture("action.slow")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(20 * time.Second)
	defer cancel()
	type res struct {
		o   *pluginv1.Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		o, err := execute(ctx, inst.conn, c.actionReq(c.name, c.fx.Action.Slow, 15*time.Second))
		done <- res{o, err}
	}()
	// Cancel as soon as the plugin knows the key.
	var found bool
	deadline := time.Now().Add(5 * time.Second)
	for !found && time.Now().Before(deadline) {
		r, err := inst.conn.Action.Cancel(ctx, &pluginv1.CancelRequest{IdempotencyKey: c.name})
		if err != nil {
			c.Fatalf("Cancel: %v", err)
		}
		found = r.GetFound()
		if !found {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !found {
		c.Fatalf("Cancel never found the running action")
	}
	began := time.Now()
	var r res
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		c.Fatalf("the cancelled action did not end within 5s")
	}
	if r.err != nil || r.o.GetStatus() != pluginv1.OutcomeStatus_OUTCOME_STATUS_CANCELLED {
		c.Errorf("cancelled action: %v %v, want outcome CANCELLED", r.o, r.err)
	}
	c.noEffectsAfter("CANCELLED")
	if took := time.Since(began); took > 1500*time.Millisecond {
		c.Errorf("the cancelled action ended %s after Cancel", took.Round(time.Millisecond))
	}
	if u, err := inst.conn.Action.Cancel(ctx, &pluginv1.CancelRequest{IdempotencyKey: "conformance-unknown-key"}); err != nil || u.GetFound() {
		c.Errorf("Cancel of an unknown key: %v %v, want OK with found=false", u, err)
	}
}
