package autoscale_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/provision/autoscale"
)

var t0 = time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func policy(mod func(*autoscale.Policy)) autoscale.Policy {
	p := autoscale.Parse(&unyov1.Autoscale{Min: 1, Max: 10, Metric: "load", Target: 100})
	if mod != nil {
		mod(&p)
	}
	return p
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       autoscale.Policy
		in      autoscale.Input
		desired int32
		rec     int32
		window  time.Duration
		err     bool
		reason  string
	}{
		{name: "three times the target triples the replicas", p: policy(nil),
			in: autoscale.Input{Current: 2, Value: 300, Now: at(0)}, desired: 6, rec: 6, reason: "scale up from 2 to 6"},
		{name: "ceil rounds up", p: policy(nil),
			in: autoscale.Input{Current: 3, Value: 150, Now: at(0)}, desired: 5, rec: 5}, // 4.5 → 5
		{name: "within tolerance nothing changes", p: policy(nil),
			in: autoscale.Input{Current: 4, Value: 109, Now: at(0)}, desired: 4, rec: 4, reason: "within tolerance"},
		{name: "just past tolerance scales", p: policy(nil),
			in: autoscale.Input{Current: 10, Value: 89, Now: at(0)}, desired: 9, rec: 9, reason: "scale down from 10 to 9"},
		{name: "after a restart a scale-down waits a window", p: policy(nil),
			in: autoscale.Input{Current: 10, Value: 89, Now: at(1), History: autoscale.Start(10, at(0))}, desired: 10, rec: 9, window: 5 * time.Minute, reason: "scale_down_window"},
		{name: "after a restart a scale-up is at once", p: policy(nil),
			in: autoscale.Input{Current: 2, Value: 300, Now: at(0), History: autoscale.Start(2, at(0))}, desired: 6, rec: 6},
		{name: "a wider tolerance holds", p: policy(func(p *autoscale.Policy) { p.Tolerance = 0.5 }),
			in: autoscale.Input{Current: 2, Value: 140, Now: at(0)}, desired: 2, rec: 2},
		{name: "clamped to max", p: policy(func(p *autoscale.Policy) { p.Max = 4 }),
			in: autoscale.Input{Current: 2, Value: 1000, Now: at(0)}, desired: 4, rec: 20, reason: "scale up from 2 to 4"},
		{name: "at max already holds", p: policy(func(p *autoscale.Policy) { p.Max = 4 }),
			in: autoscale.Input{Current: 4, Value: 1000, Now: at(0)}, desired: 4, rec: 40, reason: "max 4"},
		{name: "clamped to min", p: policy(func(p *autoscale.Policy) { p.Min, p.DownWindow = 2, 0 }),
			in: autoscale.Input{Current: 5, Value: 0, Now: at(0)}, desired: 2, rec: 0},
		{name: "above max is brought down without the metric", p: policy(func(p *autoscale.Policy) { p.Max = 3 }),
			in: autoscale.Input{Current: 7, Err: errors.New("no series"), Now: at(0)}, desired: 3, reason: "above autoscale.max"},
		{name: "below min is brought up without the metric", p: policy(func(p *autoscale.Policy) { p.Min = 2 }),
			in: autoscale.Input{Current: 1, Err: errors.New("no series"), Now: at(0)}, desired: 2, reason: "below autoscale.min"},
		{name: "zero current is left alone", p: policy(nil),
			in: autoscale.Input{Current: 0, Value: 500, Now: at(0)}, desired: 0, reason: "no replicas"},
		{name: "metric missing: no scaling", p: policy(nil),
			in: autoscale.Input{Current: 3, Err: errors.New("the metric returned no series"), Now: at(0)}, desired: 3, err: true, reason: "no series"},
		{name: "metric not a number: no scaling", p: policy(nil),
			in: autoscale.Input{Current: 3, Value: -1, Now: at(0)}, desired: 3, err: true},
		{name: "scale-up window takes the lowest recommendation", p: policy(func(p *autoscale.Policy) { p.UpWindow = time.Minute }),
			in:      autoscale.Input{Current: 2, Value: 400, Now: at(60), History: []autoscale.Recommendation{{At: at(10), Replicas: 3}, {At: at(30), Replicas: 5}}},
			desired: 3, rec: 8, reason: "scale up from 2 to 3"},
		{name: "scale-up window holds while a recommendation was current", p: policy(func(p *autoscale.Policy) { p.UpWindow = time.Minute }),
			in:      autoscale.Input{Current: 2, Value: 400, Now: at(60), History: []autoscale.Recommendation{{At: at(30), Replicas: 2}}},
			desired: 2, rec: 8, window: time.Minute, reason: "scale_up_window"},
		{name: "scale-up window forgets old recommendations", p: policy(func(p *autoscale.Policy) { p.UpWindow = time.Minute }),
			in:      autoscale.Input{Current: 2, Value: 400, Now: at(120), History: []autoscale.Recommendation{{At: at(30), Replicas: 2}}},
			desired: 8, rec: 8},
		{name: "scale-down window takes the highest recommendation", p: policy(nil),
			in:      autoscale.Input{Current: 6, Value: 50, Now: at(350), History: []autoscale.Recommendation{{At: at(0), Replicas: 9}, {At: at(100), Replicas: 4}}},
			desired: 4, rec: 3, reason: "scale down from 6 to 4"},
		{name: "scale-down after the window", p: policy(func(p *autoscale.Policy) { p.DownWindow = 3 * time.Second }),
			in:      autoscale.Input{Current: 6, Value: 50, Now: at(10), History: []autoscale.Recommendation{{At: at(6), Replicas: 18}}},
			desired: 3, rec: 3, reason: "scale down from 6 to 3"},
		{name: "scale-down within the window holds", p: policy(func(p *autoscale.Policy) { p.DownWindow = 3 * time.Second }),
			in:      autoscale.Input{Current: 6, Value: 50, Now: at(8), History: []autoscale.Recommendation{{At: at(6), Replicas: 18}}},
			desired: 6, rec: 3, window: 3 * time.Second, reason: "held at 6 by scale_down_window 3s"},
		{name: "no down window scales down at once", p: policy(func(p *autoscale.Policy) { p.DownWindow = 0 }),
			in:      autoscale.Input{Current: 6, Value: 50, Now: at(8), History: []autoscale.Recommendation{{At: at(7), Replicas: 18}}},
			desired: 3, rec: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := autoscale.Decide(tc.p, tc.in)
			if d.Desired != tc.desired || d.Recommended != tc.rec || d.Window != tc.window || (d.Err != nil) != tc.err {
				t.Errorf("desired %d, recommended %d, window %s, err %v; want %d, %d, %s, err %v (%s)",
					d.Desired, d.Recommended, d.Window, d.Err, tc.desired, tc.rec, tc.window, tc.err, d.Reason)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", d.Reason, tc.reason)
			}
			if d.Changed() != (tc.desired != tc.in.Current) {
				t.Errorf("Changed() = %v", d.Changed())
			}
		})
	}
}

// A sequence like the integration test's: up at once, down only after the
// down window has seen no higher recommendation.
func TestDecideOverTime(t *testing.T) {
	p := policy(func(p *autoscale.Policy) { p.Max, p.DownWindow = 3, 3*time.Second })
	var h []autoscale.Recommendation
	cur := int32(1)
	for _, step := range []struct {
		s     int
		value float64
		want  int32
	}{
		{0, 300, 3}, {1, 300, 3}, {2, 30, 3}, {3, 30, 3}, {4, 30, 1}, {5, 30, 1},
	} {
		d := autoscale.Decide(p, autoscale.Input{Current: cur, Value: step.value, Now: at(step.s), History: h})
		if d.Desired != step.want {
			t.Fatalf("at %ds value %v: desired %d, want %d (%s)", step.s, step.value, d.Desired, step.want, d.Reason)
		}
		cur, h = d.Desired, d.History
	}
	if len(h) > 4 {
		t.Errorf("history keeps %d recommendations past the 3s window: %v", len(h), h)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *unyov1.Autoscale
		want string
	}{
		{"valid", &unyov1.Autoscale{Min: 1, Max: 3, Metric: `avg(load{service="web"})`, Target: 10, ScaleDownWindow: "3s", Interval: "1s"}, ""},
		{"min above max", &unyov1.Autoscale{Min: 4, Max: 3, Metric: "x", Target: 1}, "need 1 <= min <= max"},
		{"min zero", &unyov1.Autoscale{Min: 0, Max: 3, Metric: "x", Target: 1}, "need 1 <= min <= max"},
		{"target zero", &unyov1.Autoscale{Min: 1, Max: 3, Metric: "x"}, ".target: must be a number above 0"},
		{"metric missing", &unyov1.Autoscale{Min: 1, Max: 3, Target: 1}, ".metric: required"},
		{"metric not MetricsQL", &unyov1.Autoscale{Min: 1, Max: 3, Target: 1, Metric: "sum(("}, ".metric: not a MetricsQL expression"},
		{"window not a duration", &unyov1.Autoscale{Min: 1, Max: 3, Target: 1, Metric: "x", ScaleUpWindow: "soon"}, ".scale_up_window: invalid duration"},
		{"window negative", &unyov1.Autoscale{Min: 1, Max: 3, Target: 1, Metric: "x", ScaleDownWindow: "-1m"}, ".scale_down_window: must not be negative"},
		{"interval too short", &unyov1.Autoscale{Min: 1, Max: 3, Target: 1, Metric: "x", Interval: "100ms"}, ".interval: at least 1s"},
		{"tolerance too big", &unyov1.Autoscale{Min: 1, Max: 3, Target: 1, Metric: "x", Tolerance: 1}, ".tolerance: must be at least 0 and below 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f validate.Fields
			autoscale.Validate(&f, "spec.compute.autoscale", tc.a)
			err := f.Err("RegionService", "web")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	p := autoscale.Parse(&unyov1.Autoscale{Min: 1, Max: 2, Metric: "x", Target: 5})
	if p.Tolerance != autoscale.DefaultTolerance || p.UpWindow != 0 || p.DownWindow != 5*time.Minute || p.Interval != 15*time.Second {
		t.Errorf("defaults: %+v", p)
	}
	p = autoscale.Parse(&unyov1.Autoscale{Min: 1, Max: 2, Metric: "x", Target: 5, Tolerance: 0.2, ScaleUpWindow: "30s", ScaleDownWindow: "1m", Interval: "2s"})
	if p.Tolerance != 0.2 || p.UpWindow != 30*time.Second || p.DownWindow != time.Minute || p.Interval != 2*time.Second {
		t.Errorf("parsed: %+v", p)
	}
}
