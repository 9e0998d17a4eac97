package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
	"github.com/unyo-ops/unyo/maintenance"
)

const (
	ok   = unyov1.Level_LEVEL_SUCCESS
	warn = unyov1.Level_LEVEL_WARNING
	crit = unyov1.Level_LEVEL_CRITICAL
)

// t0 is the fake clock's start; tests move it by hand.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rules compiles rules written as the API's JSON: name -> spec.
func rules(t testing.TB, specs map[string]string) *eventrules.Set {
	t.Helper()
	var out []eventrules.Rule
	for name, js := range specs {
		spec := new(unyov1.EventRuleSpec)
		if err := protojson.Unmarshal([]byte(js), spec); err != nil {
			t.Fatalf("rule %s: %v", name, err)
		}
		if spec.Owner == "" {
			spec.Owner, spec.Reason = "ops", "test"
		}
		r, err := eventrules.Compile(&unyov1.EventRule{Name: name, Spec: spec})
		if err != nil {
			t.Fatalf("rule %s: %v", name, err)
		}
		out = append(out, r)
	}
	return eventrules.NewSet(out)
}

// state is a fresh state with rules and maintenance.
func state(rs *eventrules.Set, ms ...maintenance.Window) *pipeline.State {
	st := pipeline.NewState()
	st.Rules, st.Maintenance, st.Cluster = rs, maintenance.NewSet(ms...), "tokyo"
	return st
}

// window compiles a maintenance as the API's JSON spec.
func window(t testing.TB, name, js string) maintenance.Window {
	t.Helper()
	spec := new(unyov1.MaintenanceSpec)
	if err := protojson.Unmarshal([]byte(js), spec); err != nil {
		t.Fatal(err)
	}
	w, err := maintenance.Compile(&unyov1.Maintenance{Name: name, Spec: spec, CreatedAt: timestamppb.New(t0)}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ev is a result of node/check at level, started at.
func ev(id, node, check string, level unyov1.Level, at time.Time) *unyov1.Event {
	return &unyov1.Event{Id: id, Cluster: "tokyo", Node: node, Check: check, Level: level, Output: check + " is " + level.String(), StartedAt: timestamppb.New(at)}
}

// withOcc sets an event's occurrences and reissue window.
func withOcc(e *unyov1.Event, occurrences int32, reissue time.Duration) *unyov1.Event {
	e.Occurrences = occurrences
	if reissue > 0 {
		e.Reissue = durationpb.New(reissue)
	}
	return e
}

// run decides events one batch at a time, as the runner does after each
// commit, and returns the decisions.
func run(st *pipeline.State, now time.Time, batches ...[]*unyov1.Event) []*pipeline.Decision {
	p := pipeline.New()
	var out []*pipeline.Decision
	for _, b := range batches {
		d := p.Decide(st, b, now)
		st.Apply(d)
		out = append(out, d)
	}
	return out
}

// applyAlerts stands in for the store: it applies a decision's alert
// operations to alerts by key, as CommitPipeline does.
func applyAlerts(t testing.TB, active map[string]*unyov1.Alert, d *pipeline.Decision) {
	t.Helper()
	for _, op := range d.Alerts {
		next, outcome, err := alerts.Apply(active[op.Key], op.Op)
		if err != nil {
			t.Fatal(err)
		}
		op.Step.Outcome = outcome
		if next != nil {
			active[op.Key] = next
		}
	}
}

// outcomes lists each explained event's outcome and steps, one line each.
func outcomes(d *pipeline.Decision) []string {
	var out []string
	for _, x := range d.Explained {
		var steps []string
		for _, s := range x.Explanation.GetSteps() {
			steps = append(steps, s.GetStage()+"("+s.GetRule()+"): "+s.GetOutcome())
		}
		out = append(out, x.ID+" "+x.Explanation.GetOutcome()+" | "+strings.Join(steps, " | "))
	}
	return out
}

func want(t testing.TB, got []string, wants ...string) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d explanations, want %d:\n%s", len(got), len(wants), strings.Join(got, "\n"))
	}
	for i := range wants {
		if !strings.Contains(got[i], wants[i]) {
			t.Errorf("explanation %d:\n got  %s\n want …%s…", i, got[i], wants[i])
		}
	}
}

// wantEitherWay decides events one batch each, the state carried over
// through State.Apply as after each commit, and then all in one batch, and
// wants the same explanations both ways.
func wantEitherWay(t testing.TB, rs *eventrules.Set, events []*unyov1.Event, wants ...string) {
	t.Helper()
	var got []string
	st := state(rs)
	for _, e := range events {
		got = append(got, outcomes(run(st, t0, []*unyov1.Event{e})[0])...)
	}
	want(t, got, wants...)
	want(t, outcomes(run(state(rs), t0, events)[0]), wants...)
}
