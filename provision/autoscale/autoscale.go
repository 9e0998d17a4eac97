// Package autoscale decides how many replicas an autoscaled RegionService
// wants, with the Kubernetes HorizontalPodAutoscaler's rule:
//
//	desired = ceil(current × value / target)
//
// where value is the service's metric (a MetricsQL expression evaluated by
// root). Nothing changes while |value/target − 1| <= tolerance. Every
// recommendation is remembered with its time: a scale-up goes to the
// lowest recommendation of the last scale_up_window (default 0s: at once),
// a scale-down to the highest of the last scale_down_window (default 5m),
// so that a short dip or spike does not make replicas flap. The result is
// clamped to [min, max]; a service outside [min, max] (an operator applied
// another count, or changed the bounds) is brought inside at once, before
// the metric is even read, as the HPA does.
//
// The package is pure: the caller evaluates the metric, passes the clock's
// time and keeps the recommendations between evaluations.
package autoscale

import (
	"fmt"
	"math"
	"time"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// Defaults of the fields left empty.
const (
	DefaultTolerance       = 0.1
	DefaultScaleUpWindow   = time.Duration(0)
	DefaultScaleDownWindow = 5 * time.Minute
	DefaultInterval        = 15 * time.Second
	// MinInterval bounds how often a service's metric is evaluated.
	MinInterval = time.Second
)

// Policy is a service's autoscale spec, parsed and with its defaults.
type Policy struct {
	Min, Max             int32
	Metric               string
	Target, Tolerance    float64
	UpWindow, DownWindow time.Duration
	Interval             time.Duration
}

// Validate records what is wrong with an autoscale spec under field.
func Validate(f *validate.Fields, field string, a *unyov1.Autoscale) {
	if a == nil {
		return
	}
	// Zero replicas deletes a service, so an autoscaler may never go there.
	if a.GetMin() < 1 || a.GetMax() < a.GetMin() {
		f.Addf(field, "min %d and max %d: need 1 <= min <= max", a.GetMin(), a.GetMax())
	}
	if !(a.GetTarget() > 0) || math.IsInf(a.GetTarget(), 0) {
		f.Addf(field+".target", "must be a number above 0 (the metric's value per replica count that needs no scaling), got %v", a.GetTarget())
	}
	if t := a.GetTolerance(); t < 0 || t >= 1 || math.IsNaN(t) {
		f.Addf(field+".tolerance", "must be at least 0 and below 1 (a relative change; default %v), got %v", DefaultTolerance, t)
	}
	switch m := a.GetMetric(); {
	case m == "":
		f.Add(field+".metric", "required: a MetricsQL expression whose value is compared with target")
	default:
		if _, err := metricsql.Parse(m); err != nil {
			f.Addf(field+".metric", "not a MetricsQL expression: %v", err)
		}
	}
	for _, w := range [...]struct{ name, raw string }{
		{"scale_up_window", a.GetScaleUpWindow()}, {"scale_down_window", a.GetScaleDownWindow()}, {"interval", a.GetInterval()},
	} {
		if w.raw == "" {
			continue
		}
		if d, ok := f.Duration(field+"."+w.name, w.raw); ok && d < 0 {
			f.Addf(field+"."+w.name, "must not be negative, got %s", w.raw)
		}
	}
	if d, err := time.ParseDuration(a.GetInterval()); err == nil && d < MinInterval {
		f.Addf(field+".interval", "at least %s, got %s", MinInterval, a.GetInterval())
	}
}

// Parse returns the policy of a valid autoscale spec (see Validate), with
// the defaults of its empty fields.
func Parse(a *unyov1.Autoscale) Policy {
	p := Policy{Min: a.GetMin(), Max: a.GetMax(), Metric: a.GetMetric(), Target: a.GetTarget(), Tolerance: a.GetTolerance(),
		UpWindow: DefaultScaleUpWindow, DownWindow: DefaultScaleDownWindow, Interval: DefaultInterval}
	if p.Tolerance == 0 {
		p.Tolerance = DefaultTolerance
	}
	for _, d := range [...]struct {
		raw string
		to  *time.Duration
	}{{a.GetScaleUpWindow(), &p.UpWindow}, {a.GetScaleDownWindow(), &p.DownWindow}, {a.GetInterval(), &p.Interval}} {
		if v, err := time.ParseDuration(d.raw); err == nil && v >= 0 {
			*d.to = v
		}
	}
	p.Interval = max(p.Interval, MinInterval)
	return p
}

// Recommendation is what one evaluation recommended, and when.
type Recommendation struct {
	At       time.Time
	Replicas int32
}

// Start is the history of a service the caller has no recommendations of
// (root just started): as if the current count had been recommended now,
// so that a scale-down waits a whole scale_down_window again rather than
// acting on a single evaluation.
func Start(current int32, now time.Time) []Recommendation {
	return []Recommendation{{At: now, Replicas: current}}
}

// Input is one evaluation's inputs.
type Input struct {
	// Current is the service's replica count now.
	Current int32
	// Value is the metric's value; Err says why there is none.
	Value float64
	Err   error
	Now   time.Time
	// History are the recommendations kept from earlier evaluations.
	History []Recommendation
}

// Decision is one evaluation's outcome.
type Decision struct {
	Current, Desired int32
	// Recommended is the HPA rule's count before the windows and clamps
	// (Current when within tolerance; 0 when the metric was not used).
	Recommended int32
	Value       float64
	Target      float64
	// Window is the stabilization window that held the change back, if
	// one did.
	Window time.Duration
	// Reason says what was decided and from what, in an operator's words.
	Reason string
	// Err is set when the metric could not be used: nothing is scaled.
	Err error
	// History is what to keep for the next evaluation.
	History []Recommendation
}

// Changed says whether the decision changes the replica count.
func (d Decision) Changed() bool { return d.Desired != d.Current }

// Decide applies the HPA rule, the tolerance, the stabilization windows
// and the clamps.
func Decide(p Policy, in Input) Decision {
	d := Decision{Current: in.Current, Desired: in.Current, Value: in.Value, Target: p.Target,
		History: prune(in.History, in.Now, max(p.UpWindow, p.DownWindow))}
	switch {
	case in.Current <= 0:
		d.Reason = "the service has no replicas (it is being deleted): nothing to scale"
		return d
	case in.Current > p.Max:
		d.Desired = p.Max
		d.Reason = fmt.Sprintf("%d replicas are above autoscale.max %d: scaled to max", in.Current, p.Max)
		return d
	case in.Current < p.Min:
		d.Desired = p.Min
		d.Reason = fmt.Sprintf("%d replicas are below autoscale.min %d: scaled to min", in.Current, p.Min)
		return d
	case in.Err != nil:
		d.Err = in.Err
		d.Reason = fmt.Sprintf("no scaling: the metric cannot be used: %v", in.Err)
		return d
	case math.IsNaN(in.Value) || math.IsInf(in.Value, 0) || in.Value < 0:
		d.Err = fmt.Errorf("the metric's value is %v, not a number of 0 or more", in.Value)
		d.Reason = fmt.Sprintf("no scaling: %v", d.Err)
		return d
	}
	ratio := in.Value / p.Target
	inputs := fmt.Sprintf("metric %s / target %s = %s", num(in.Value), num(p.Target), num(ratio))
	raw := in.Current
	if math.Abs(ratio-1) > p.Tolerance {
		raw = int32(min(math.Ceil(float64(in.Current)*ratio), math.MaxInt32))
	}
	d.Recommended = raw

	// Scale up to the lowest recommendation of the up window, down to the
	// highest of the down window; the current count in between holds.
	up, down := raw, raw
	for _, r := range d.History {
		if r.At.After(in.Now.Add(-p.UpWindow)) {
			up = min(up, r.Replicas)
		}
		if r.At.After(in.Now.Add(-p.DownWindow)) {
			down = max(down, r.Replicas)
		}
	}
	d.History = append(d.History, Recommendation{At: in.Now, Replicas: raw})
	desired := min(max(in.Current, up), down)
	d.Desired = min(max(desired, p.Min), p.Max)

	switch {
	case raw == in.Current:
		d.Reason = fmt.Sprintf("%s is within tolerance %s: %d replicas hold", inputs, num(p.Tolerance), in.Current)
	case raw > in.Current && desired < raw && desired == in.Current:
		d.Window = p.UpWindow
		d.Reason = fmt.Sprintf("%s recommends %d replicas; held at %d by scale_up_window %s (lowest recommendation %d)", inputs, raw, in.Current, p.UpWindow, up)
	case raw < in.Current && desired > raw && desired == in.Current:
		d.Window = p.DownWindow
		d.Reason = fmt.Sprintf("%s recommends %d replicas; held at %d by scale_down_window %s (highest recommendation %d)", inputs, raw, in.Current, p.DownWindow, down)
	case d.Desired == in.Current:
		d.Reason = fmt.Sprintf("%s recommends %d replicas; held at %d by autoscale min %d / max %d", inputs, raw, in.Current, p.Min, p.Max)
	default:
		verb := "up"
		if d.Desired < in.Current {
			verb = "down"
		}
		d.Reason = fmt.Sprintf("scale %s from %d to %d replicas: %s recommends %d (min %d, max %d, scale_up_window %s, scale_down_window %s)",
			verb, in.Current, d.Desired, inputs, raw, p.Min, p.Max, p.UpWindow, p.DownWindow)
	}
	return d
}

// prune keeps the recommendations younger than keep.
func prune(h []Recommendation, now time.Time, keep time.Duration) []Recommendation {
	out := make([]Recommendation, 0, len(h)+1)
	for _, r := range h {
		if r.At.After(now.Add(-keep)) {
			out = append(out, r)
		}
	}
	return out
}

// num prints a number briefly: 300, 0.333, 1.5e+06.
func num(v float64) string { return fmt.Sprintf("%.4g", v) }
