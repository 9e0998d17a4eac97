package checks

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/checks/nagios"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// DefaultLogInterval is a log check's interval when spec.interval is unset:
// at most one event per check and interval, however many lines match.
const DefaultLogInterval = time.Minute

// Metric is a compiled metric check: a MetricsQL expression whose every
// returned series is compared with Nagios ranges.
type Metric struct {
	Expr string
	// Warning and Critical are nil when not given; at least one is set.
	Warning, Critical *nagios.Range
	// For is how long a condition must hold before its level is raised.
	For time.Duration
	// NoData is the status reported when the expression returns no series.
	NoData unyov1.CheckStatus
}

// Judge compares one value with the thresholds, critical first, and words
// the result for the event's output, such as "node_load1 = 7.2 (warning
// above 5)". name is what the value is of (the metric, or the series).
func (m *Metric) Judge(name string, v float64) (unyov1.CheckStatus, string) {
	text := name + " = " + formatValue(v)
	for _, t := range []struct {
		r      *nagios.Range
		status unyov1.CheckStatus
	}{
		{m.Critical, unyov1.CheckStatus_CHECK_STATUS_CRITICAL},
		{m.Warning, unyov1.CheckStatus_CHECK_STATUS_WARNING},
	} {
		if t.r != nil && t.r.Alerts(v) {
			return t.status, fmt.Sprintf("%s (%s %s)", text, t.status.Name(), describeBreach(*t.r, v))
		}
	}
	return unyov1.CheckStatus_CHECK_STATUS_OK, text
}

// describeBreach says which side of the range v broke, in words an operator
// reads faster than range syntax.
func describeBreach(r nagios.Range, v float64) string {
	switch {
	case r.Inside:
		return "within " + r.String()
	case !r.EndInf && v > r.End:
		return "above " + formatValue(r.End)
	default:
		return "below " + formatValue(r.Start)
	}
}

func formatValue(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Pending tracks how long a series' conditions have held, so that a level
// is raised only after the check's `for` duration, as in Prometheus'
// alerting rules. The zero value is a series that was OK.
type Pending struct {
	warnSince, critSince time.Time
}

// Step records the raw status of one evaluation at now and returns the
// status to report: WARNING or CRITICAL only once that condition (CRITICAL
// counts as WARNING too, so a series going from warning to critical stays
// warning meanwhile) has held for at least hold; OK otherwise. UNKNOWN (no
// data, a failed query) is held like CRITICAL and reported as UNKNOWN.
// pendingFor is how long the condition not reported yet has held; 0 when
// raw is reported as it is.
func (p *Pending) Step(raw unyov1.CheckStatus, now time.Time, hold time.Duration) (status unyov1.CheckStatus, pendingFor time.Duration) {
	severe := raw == unyov1.CheckStatus_CHECK_STATUS_CRITICAL || raw == unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
	if raw == unyov1.CheckStatus_CHECK_STATUS_OK {
		*p = Pending{}
		return raw, 0
	}
	if p.warnSince.IsZero() {
		p.warnSince = now
	}
	if !severe {
		p.critSince = time.Time{}
	} else if p.critSince.IsZero() {
		p.critSince = now
	}
	switch {
	case severe && now.Sub(p.critSince) >= hold:
		return raw, 0
	case now.Sub(p.warnSince) >= hold:
		status = unyov1.CheckStatus_CHECK_STATUS_WARNING
	default:
		status = unyov1.CheckStatus_CHECK_STATUS_OK
	}
	switch {
	case status == raw:
		return status, 0
	case severe:
		return status, now.Sub(p.critSince)
	}
	return status, now.Sub(p.warnSince)
}

// Log is a compiled log check. Every given condition must hold for a line
// to match.
type Log struct {
	App, File string
	// Pattern and FieldPattern are nil when not given.
	Pattern      *regexp.Regexp
	Field        string
	FieldPattern *regexp.Regexp
	Levels       []string
	// Level is the event level of a match: WARNING or CRITICAL.
	Level unyov1.Level
}

// logLevels are the normalized levels a tailed line can have (see
// core/logtail), which spec.log.levels may name.
var logLevels = []string{"trace", "debug", "info", "warn", "error", "fatal"}

// Matches reports whether one tailed line matches. level is the line's
// normalized level, fields its structured fields.
func (l *Log) Matches(app, file, level, message string, fields map[string]string) bool {
	if (l.App != "" && app != l.App) || (l.File != "" && file != l.File) {
		return false
	}
	if len(l.Levels) > 0 && !slices.Contains(l.Levels, level) {
		return false
	}
	if l.Pattern != nil && !l.Pattern.MatchString(message) {
		return false
	}
	if l.FieldPattern != nil {
		v, ok := fields[l.Field]
		if !ok || !l.FieldPattern.MatchString(v) {
			return false
		}
	}
	return true
}

func (v *validator) metric(m *unyov1.MetricCheck) *Metric {
	d := &Metric{Expr: m.GetExpr()}
	if d.Expr == "" {
		v.Add("spec.metric.expr", "required: a MetricsQL expression such as node_load1 or avg by (node) (node_load5)")
	} else if _, err := metricsql.Parse(d.Expr); err != nil {
		v.Addf("spec.metric.expr", "invalid MetricsQL %q: %v", d.Expr, err)
	}
	threshold := func(field, raw string) *nagios.Range {
		if raw == "" {
			return nil
		}
		r, err := nagios.ParseRange(raw)
		if err != nil {
			v.Addf(field, "%v (expected a Nagios range such as 5, ~:5, 10: or @1:3)", err)
			return nil
		}
		return &r
	}
	d.Warning = threshold("spec.metric.warning", m.GetWarning())
	d.Critical = threshold("spec.metric.critical", m.GetCritical())
	if m.GetWarning() == "" && m.GetCritical() == "" {
		v.Add("spec.metric.critical", "required: set spec.metric.warning or spec.metric.critical (a Nagios range such as 5: alert above 5)")
	}
	if raw := m.GetFor(); raw != "" {
		if f, ok := v.Duration("spec.metric.for", raw); ok {
			if f < 0 {
				v.Addf("spec.metric.for", "must not be negative, got %q", raw)
			}
			d.For = f
		}
	}
	d.NoData = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
	if raw := m.GetNoData(); raw != "" {
		s, err := unyov1.ParseCheckStatus(raw)
		if err != nil {
			v.Addf("spec.metric.no_data", `must be "unknown", "ok", "warning" or "critical", got %q`, raw)
		}
		d.NoData = s
	}
	return d
}

func (v *validator) log(l *unyov1.LogCheck) *Log {
	d := &Log{App: l.GetApp(), File: l.GetFile(), Field: l.GetField(), Levels: slices.Clone(l.GetLevels())}
	re := func(field, raw string) *regexp.Regexp {
		if raw == "" {
			return nil
		}
		r, err := regexp.Compile(raw)
		if err != nil {
			v.Addf(field, "invalid regular expression %q: %v", raw, err)
		}
		return r
	}
	d.Pattern = re("spec.log.pattern", l.GetPattern())
	d.FieldPattern = re("spec.log.field_pattern", l.GetFieldPattern())
	switch {
	case l.GetField() != "" && l.GetFieldPattern() == "":
		v.Add("spec.log.field_pattern", "required with spec.log.field: the regular expression its value must match")
	case l.GetField() == "" && l.GetFieldPattern() != "":
		v.Add("spec.log.field", "required with spec.log.field_pattern: the name of the field to match")
	}
	for i, lv := range d.Levels {
		if !slices.Contains(logLevels, lv) {
			v.Addf(fmt.Sprintf("spec.log.levels[%d]", i), "unknown level %q; use one of %v", lv, logLevels)
		}
	}
	if l.GetPattern() == "" && l.GetField() == "" && l.GetFieldPattern() == "" && len(d.Levels) == 0 {
		v.Add("spec.log.pattern", "required: set spec.log.pattern, spec.log.field with spec.log.field_pattern, or spec.log.levels (a check on every line would alert on every line)")
	}
	d.Level = v.alertLevel("spec.log.level", l.GetLevel())
	return d
}

// Plugin is a check run by the check plugin unyo-check-<Name> on agents.
type Plugin struct {
	Name string
	// Target is what the plugin checks, sent as its RunRequest.target.
	Target map[string]any
}

// TargetStruct is Target as the plugin protocol carries it.
func (p *Plugin) TargetStruct() (*structpb.Struct, error) {
	return structpb.NewStruct(p.Target)
}

// targetJSON is Target in canonical form (sorted keys), for SpecHash.
func (p *Plugin) targetJSON() string {
	b, err := json.Marshal(p.Target)
	if err != nil {
		return fmt.Sprint(p.Target)
	}
	return string(b)
}

func (v *validator) plugin(pc *unyov1.PluginCheck) *Plugin {
	p := &Plugin{Name: pc.GetName(), Target: pc.GetTarget().AsMap()}
	switch {
	case p.Name == "":
		v.Add("spec.plugin.name", "required: the check plugin to run (unyo-check-<name>, enabled in agent.plugins)")
	case strings.ContainsAny(p.Name, "/ \t\n"):
		v.Addf("spec.plugin.name", "%q must be a plugin name (the <name> in unyo-check-<name>), without slashes or spaces", p.Name)
	}
	return p
}

func rangeString(r *nagios.Range) string {
	if r == nil {
		return ""
	}
	return r.String()
}

func regexpString(r *regexp.Regexp) string {
	if r == nil {
		return ""
	}
	return r.String()
}
