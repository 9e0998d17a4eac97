package checks_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestCompileMetricAndLog(t *testing.T) {
	d, err := checks.Compile(check("load", &unyov1.CheckSpec{Interval: "30s",
		Metric: &unyov1.MetricCheck{Expr: "node_load1", Warning: "~:5", Critical: "10", For: "2m", NoData: "ok"}}))
	if err != nil {
		t.Fatal(err)
	}
	m := d.Metric
	if m == nil || m.For != 2*time.Minute || m.NoData != unyov1.CheckStatus_CHECK_STATUS_OK || m.Warning.String() != "~:5" || m.Critical.String() != "10" {
		t.Errorf("metric = %+v", m)
	}
	d, err = checks.Compile(check("errors", &unyov1.CheckSpec{Log: &unyov1.LogCheck{Pattern: "ERROR"}}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Interval != checks.DefaultLogInterval || d.Log.Level != unyov1.Level_LEVEL_CRITICAL {
		t.Errorf("log check defaults: interval %v, level %v; want %v, critical", d.Interval, d.Log.Level, checks.DefaultLogInterval)
	}
	other, _ := checks.Compile(check("errors", &unyov1.CheckSpec{Log: &unyov1.LogCheck{Pattern: "ERROR", Level: "warning"}}))
	if other.SpecHash() == d.SpecHash() {
		t.Error("SpecHash ignores the log check's level")
	}
}

func TestCompileMetricAndLogInvalid(t *testing.T) {
	metric := func(f func(m *unyov1.MetricCheck)) *unyov1.CheckSpec {
		m := &unyov1.MetricCheck{Expr: "node_load1", Warning: "5"}
		f(m)
		return &unyov1.CheckSpec{Interval: "1m", Metric: m}
	}
	logc := func(f func(l *unyov1.LogCheck)) *unyov1.CheckSpec {
		l := &unyov1.LogCheck{Pattern: "ERROR"}
		f(l)
		return &unyov1.CheckSpec{Log: l}
	}
	tests := []struct {
		name     string
		spec     *unyov1.CheckSpec
		field    string
		contains string
	}{
		{"metric and command", &unyov1.CheckSpec{Command: []string{"check_load"}, Interval: "1m", Metric: &unyov1.MetricCheck{Expr: "up", Critical: "1"}}, "spec.metric", "exactly one of spec.command, spec.metric, spec.log and spec.plugin"},
		{"plugin and command", &unyov1.CheckSpec{Command: []string{"check_load"}, Interval: "1m", Plugin: &unyov1.PluginCheck{Name: "tcp"}}, "spec.plugin", "cannot be combined with spec.command;"},
		{"plugin, log and metric", &unyov1.CheckSpec{Interval: "1m", Metric: &unyov1.MetricCheck{Expr: "up", Critical: "1"}, Log: &unyov1.LogCheck{Pattern: "x"}, Plugin: &unyov1.PluginCheck{Name: "tcp"}}, "spec.plugin", "cannot be combined with spec.metric and spec.log"},
		{"plugin without name", &unyov1.CheckSpec{Interval: "1m", Plugin: &unyov1.PluginCheck{}}, "spec.plugin.name", "required"},
		{"plugin name with slash", &unyov1.CheckSpec{Interval: "1m", Plugin: &unyov1.PluginCheck{Name: "check/tcp"}}, "spec.plugin.name", "without slashes"},
		{"plugin with env", &unyov1.CheckSpec{Interval: "1m", Env: map[string]string{"A": "b"}, Plugin: &unyov1.PluginCheck{Name: "tcp"}}, "spec.env", "only a command check"},
		{"metric and log", &unyov1.CheckSpec{Interval: "1m", Metric: &unyov1.MetricCheck{Expr: "up", Critical: "1"}, Log: &unyov1.LogCheck{Pattern: "x"}}, "spec.log", "cannot be combined with spec.metric"},
		{"log and command", &unyov1.CheckSpec{Command: []string{"check_load"}, Interval: "1m", Log: &unyov1.LogCheck{Pattern: "x"}}, "spec.log", "cannot be combined with spec.command"},
		{"metric without interval", &unyov1.CheckSpec{Metric: &unyov1.MetricCheck{Expr: "up", Critical: "1"}}, "spec.interval", "how often the cluster evaluates"},
		{"metric on cron", &unyov1.CheckSpec{Cron: "@hourly", Metric: &unyov1.MetricCheck{Expr: "up", Critical: "1"}}, "spec.cron", "runs on spec.interval"},
		{"metric with env", &unyov1.CheckSpec{Interval: "1m", Env: map[string]string{"A": "b"}, Metric: &unyov1.MetricCheck{Expr: "up", Critical: "1"}}, "spec.env", "only a command check"},
		{"no expr", metric(func(m *unyov1.MetricCheck) { m.Expr = "" }), "spec.metric.expr", "required"},
		{"bad expr", metric(func(m *unyov1.MetricCheck) { m.Expr = "sum((" }), "spec.metric.expr", `invalid MetricsQL "sum(("`},
		{"no threshold", metric(func(m *unyov1.MetricCheck) { m.Warning = "" }), "spec.metric.critical", "set spec.metric.warning or spec.metric.critical"},
		{"bad warning", metric(func(m *unyov1.MetricCheck) { m.Warning = "high" }), "spec.metric.warning", `invalid range "high"`},
		{"bad critical", metric(func(m *unyov1.MetricCheck) { m.Critical = "20:10" }), "spec.metric.critical", "greater than end"},
		{"bad for", metric(func(m *unyov1.MetricCheck) { m.For = "a while" }), "spec.metric.for", "invalid duration"},
		{"negative for", metric(func(m *unyov1.MetricCheck) { m.For = "-1m" }), "spec.metric.for", "must not be negative"},
		{"bad no_data", metric(func(m *unyov1.MetricCheck) { m.NoData = "fine" }), "spec.metric.no_data", `got "fine"`},
		{"log on cron", &unyov1.CheckSpec{Cron: "@hourly", Log: &unyov1.LogCheck{Pattern: "x"}}, "spec.cron", "runs on spec.interval"},
		{"log matches everything", logc(func(l *unyov1.LogCheck) { l.Pattern = "" }), "spec.log.pattern", "required"},
		{"bad pattern", logc(func(l *unyov1.LogCheck) { l.Pattern = "ERROR(" }), "spec.log.pattern", `invalid regular expression "ERROR("`},
		{"field without pattern", logc(func(l *unyov1.LogCheck) { l.Field = "status" }), "spec.log.field_pattern", "required with spec.log.field"},
		{"field pattern without field", logc(func(l *unyov1.LogCheck) { l.FieldPattern = "5.." }), "spec.log.field", "required with spec.log.field_pattern"},
		{"bad field pattern", logc(func(l *unyov1.LogCheck) { l.Field, l.FieldPattern = "status", "[" }), "spec.log.field_pattern", "invalid regular expression"},
		{"unknown line level", logc(func(l *unyov1.LogCheck) { l.Levels = []string{"error", "ERROR"} }), "spec.log.levels[1]", `unknown level "ERROR"`},
		{"bad event level", logc(func(l *unyov1.LogCheck) { l.Level = "fatal" }), "spec.log.level", `must be "critical" or "warning"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checks.Compile(check("c", tt.spec))
			var ve *checks.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) != 1 {
				t.Fatalf("want exactly one field error, got %v", err)
			}
			if f := ve.Fields[0]; f.Field != tt.field || !strings.Contains(f.Description, tt.contains) {
				t.Errorf("got %s: %s\nwant %s: ...%s...", f.Field, f.Description, tt.field, tt.contains)
			}
		})
	}
}

func TestCompilePlugin(t *testing.T) {
	target, err := structpb.NewStruct(map[string]any{"address": "127.0.0.1:22", "warning": "1s"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := checks.Compile(check("ssh", &unyov1.CheckSpec{Cron: "@every 1m", Plugin: &unyov1.PluginCheck{Name: "tcp", Target: target}}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Plugin == nil || d.Plugin.Name != "tcp" || d.Plugin.Target["address"] != "127.0.0.1:22" || len(d.Command) != 0 {
		t.Fatalf("got %+v", d)
	}
	s, err := d.Plugin.TargetStruct()
	if err != nil || !proto.Equal(s, target) {
		t.Errorf("TargetStruct() = %v, %v; want %v", s, err, target)
	}
	// The target is part of what the check does.
	other, _ := structpb.NewStruct(map[string]any{"address": "127.0.0.1:23", "warning": "1s"})
	d2, err := checks.Compile(check("ssh", &unyov1.CheckSpec{Cron: "@every 1m", Plugin: &unyov1.PluginCheck{Name: "tcp", Target: other}}))
	if err != nil {
		t.Fatal(err)
	}
	if d.SpecHash() == d2.SpecHash() {
		t.Error("SpecHash ignores spec.plugin.target")
	}
	d3, _ := checks.Compile(check("ssh", &unyov1.CheckSpec{Cron: "@every 1m", Plugin: &unyov1.PluginCheck{Name: "tcp", Target: target}}))
	if d.SpecHash() != d3.SpecHash() {
		t.Error("SpecHash differs for the same plugin check")
	}
}

func TestMetricJudge(t *testing.T) {
	d, err := checks.Compile(check("m", &unyov1.CheckSpec{Interval: "1m",
		Metric: &unyov1.MetricCheck{Expr: "x", Warning: "5", Critical: "@-1:-0.5"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		v      float64
		status unyov1.CheckStatus
		text   string
	}{
		{3, unyov1.CheckStatus_CHECK_STATUS_OK, "x = 3"},
		{5, unyov1.CheckStatus_CHECK_STATUS_OK, "x = 5"},
		{7.2, unyov1.CheckStatus_CHECK_STATUS_WARNING, "x = 7.2 (warning above 5)"},
		{-0.2, unyov1.CheckStatus_CHECK_STATUS_WARNING, "x = -0.2 (warning below 0)"},
		{-0.7, unyov1.CheckStatus_CHECK_STATUS_CRITICAL, "x = -0.7 (critical within @-1:-0.5)"},
	} {
		status, text := d.Metric.Judge("x", tt.v)
		if status != tt.status || text != tt.text {
			t.Errorf("Judge(%v) = %v %q, want %v %q", tt.v, status, text, tt.status, tt.text)
		}
	}
}

func TestPendingStep(t *testing.T) {
	const (
		ok   = unyov1.CheckStatus_CHECK_STATUS_OK
		warn = unyov1.CheckStatus_CHECK_STATUS_WARNING
		crit = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
		unkn = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
	)
	t0 := time.Unix(1e9, 0)
	for _, tt := range []struct {
		name  string
		hold  time.Duration
		raw   []unyov1.CheckStatus // one per 10s
		want  []unyov1.CheckStatus
		final time.Duration // pendingFor of the last step
	}{
		{"no for", 0, []unyov1.CheckStatus{ok, warn, crit, ok}, []unyov1.CheckStatus{ok, warn, crit, ok}, 0},
		{"warning after for", 20 * time.Second, []unyov1.CheckStatus{warn, warn, warn}, []unyov1.CheckStatus{ok, ok, warn}, 0},
		{"a gap restarts for", 20 * time.Second, []unyov1.CheckStatus{warn, warn, ok, warn, warn}, []unyov1.CheckStatus{ok, ok, ok, ok, ok}, 10 * time.Second},
		{"critical held as warning first", 20 * time.Second, []unyov1.CheckStatus{warn, crit, crit, crit}, []unyov1.CheckStatus{ok, ok, warn, crit}, 0},
		{"critical back to warning", 10 * time.Second, []unyov1.CheckStatus{crit, crit, warn}, []unyov1.CheckStatus{ok, crit, warn}, 0},
		{"unknown held like critical", 10 * time.Second, []unyov1.CheckStatus{unkn, unkn}, []unyov1.CheckStatus{ok, unkn}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p checks.Pending
			var held time.Duration
			for i, raw := range tt.raw {
				var got unyov1.CheckStatus
				got, held = p.Step(raw, t0.Add(time.Duration(i)*10*time.Second), tt.hold)
				if got != tt.want[i] {
					t.Errorf("step %d (%v): %v, want %v", i, raw, got, tt.want[i])
				}
			}
			if held != tt.final {
				t.Errorf("pending for %v at the end, want %v", held, tt.final)
			}
		})
	}
}

func TestLogMatches(t *testing.T) {
	compile := func(l *unyov1.LogCheck) *checks.Log {
		d, err := checks.Compile(check("l", &unyov1.CheckSpec{Log: l}))
		if err != nil {
			t.Fatal(err)
		}
		return d.Log
	}
	type line struct {
		app, file, level, msg string
		fields                map[string]string
	}
	for _, tt := range []struct {
		name string
		spec *unyov1.LogCheck
		line line
		want bool
	}{
		{"pattern", &unyov1.LogCheck{Pattern: "db (down|gone)"}, line{msg: "the db down again"}, true},
		{"pattern misses", &unyov1.LogCheck{Pattern: "db down"}, line{msg: "db up"}, false},
		{"app", &unyov1.LogCheck{App: "shop", Pattern: "x"}, line{app: "blog", msg: "x"}, false},
		{"file", &unyov1.LogCheck{File: "/var/log/a.log", Pattern: "x"}, line{file: "/var/log/a.log", msg: "x"}, true},
		{"levels", &unyov1.LogCheck{Levels: []string{"error", "fatal"}}, line{level: "fatal"}, true},
		{"levels miss", &unyov1.LogCheck{Levels: []string{"error"}}, line{level: "warn"}, false},
		{"field", &unyov1.LogCheck{Field: "status", FieldPattern: "^5"}, line{fields: map[string]string{"status": "503"}}, true},
		{"field absent", &unyov1.LogCheck{Field: "status", FieldPattern: ".*"}, line{}, false},
		{"all conditions", &unyov1.LogCheck{Pattern: "timeout", Levels: []string{"error"}}, line{level: "info", msg: "timeout"}, false},
	} {
		l := compile(tt.spec)
		if got := l.Matches(tt.line.app, tt.line.file, tt.line.level, tt.line.msg, tt.line.fields); got != tt.want {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.want)
		}
	}
}
