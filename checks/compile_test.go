package checks_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func check(name string, spec *unyov1.CheckSpec) *unyov1.Check {
	return &unyov1.Check{Name: name, Spec: spec, Revision: 7, Source: "central"}
}

func TestCompileDefaults(t *testing.T) {
	d, err := checks.Compile(check("disk", &unyov1.CheckSpec{
		Command:  []string{"check_disk", "-w", "20%"},
		Interval: "1m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "disk" || d.Revision != 7 || d.Source != "central" {
		t.Errorf("metadata not copied: %+v", d)
	}
	if d.Interval != time.Minute || d.Cron != "" || d.Schedule != nil {
		t.Errorf("schedule = %v %q %v, want 1m only", d.Interval, d.Cron, d.Schedule)
	}
	if d.Timeout != checks.DefaultTimeout {
		t.Errorf("Timeout = %v, want %v", d.Timeout, checks.DefaultTimeout)
	}
	if d.TimeoutStatus != unyov1.CheckStatus_CHECK_STATUS_UNKNOWN {
		t.Errorf("TimeoutStatus = %v, want UNKNOWN", d.TimeoutStatus)
	}
	if d.UnknownLevel != unyov1.Level_LEVEL_CRITICAL {
		t.Errorf("UnknownLevel = %v, want CRITICAL", d.UnknownLevel)
	}
	if d.Occurrences != 1 || d.Reissue != 0 {
		t.Errorf("Occurrences, Reissue = %d, %v; want 1, 0", d.Occurrences, d.Reissue)
	}
}

func TestCompileValid(t *testing.T) {
	tests := []struct {
		name  string
		spec  *unyov1.CheckSpec
		check func(t *testing.T, d checks.Definition)
	}{
		{
			name: "short interval lowers the default timeout",
			spec: &unyov1.CheckSpec{Command: []string{"check_load"}, Interval: "10s"},
			check: func(t *testing.T, d checks.Definition) {
				if d.Timeout != 10*time.Second {
					t.Errorf("Timeout = %v, want 10s", d.Timeout)
				}
			},
		},
		{
			name: "every field set",
			spec: &unyov1.CheckSpec{
				Command:       []string{"/opt/plugins/check_x", "--flag"},
				Interval:      "5m",
				Timeout:       "5m",
				TimeoutStatus: "critical",
				Occurrences:   3,
				Reissue:       "1h",
				NodeSelector:  map[string]string{"role": "db"},
				Env:           map[string]string{"LANG": "C"},
				UnknownLevel:  "warning",
				MetricsFormat: "prometheus",
				Ttl:           "15m",
			},
			check: func(t *testing.T, d checks.Definition) {
				if d.Timeout != 5*time.Minute || d.TimeoutStatus != unyov1.CheckStatus_CHECK_STATUS_CRITICAL ||
					d.Occurrences != 3 || d.Reissue != time.Hour || d.UnknownLevel != unyov1.Level_LEVEL_WARNING ||
					d.NodeSelector["role"] != "db" || d.Env["LANG"] != "C" || d.MetricsFormat != checks.MetricsPrometheus || d.TTL != 15*time.Minute {
					t.Errorf("fields not applied: %+v", d)
				}
			},
		},
		{
			name: "cron with five fields",
			spec: &unyov1.CheckSpec{Command: []string{"check_backup"}, Cron: "CRON_TZ=UTC 30 3 * * *", Timeout: "10m"},
			check: func(t *testing.T, d checks.Definition) {
				from := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
				want := time.Date(2025, 1, 2, 3, 30, 0, 0, time.UTC)
				if got := d.Schedule.Next(from); !got.Equal(want) {
					t.Errorf("Next(%v) = %v, want %v", from, got, want)
				}
				if d.Interval != 0 || d.Timeout != 10*time.Minute {
					t.Errorf("Interval, Timeout = %v, %v; want 0, 10m", d.Interval, d.Timeout)
				}
			},
		},
		{
			name: "cron descriptors",
			spec: &unyov1.CheckSpec{Command: []string{"check_x"}, Cron: "@every 90s"},
			check: func(t *testing.T, d checks.Definition) {
				from := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
				if got, want := d.Schedule.Next(from), from.Add(90*time.Second); !got.Equal(want) {
					t.Errorf("Next = %v, want %v", got, want)
				}
			},
		},
		{
			name:  "hourly",
			spec:  &unyov1.CheckSpec{Command: []string{"check_x"}, Cron: "@hourly"},
			check: func(t *testing.T, d checks.Definition) {},
		},
		{
			name:  "command with spaces in a path is fine when arguments are separate",
			spec:  &unyov1.CheckSpec{Command: []string{"/opt/my plugins/check_x", "-v"}, Interval: "1m"},
			check: func(t *testing.T, d checks.Definition) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := checks.Compile(check("c1", tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, d)
		})
	}
}

func TestCompileInvalid(t *testing.T) {
	valid := func() *unyov1.CheckSpec {
		return &unyov1.CheckSpec{Command: []string{"check_disk"}, Interval: "1m"}
	}
	with := func(f func(s *unyov1.CheckSpec)) *unyov1.CheckSpec {
		s := valid()
		f(s)
		return s
	}
	tests := []struct {
		name      string
		checkName string
		spec      *unyov1.CheckSpec
		field     string
		contains  string
	}{
		{"empty name", "", valid(), "name", "required"},
		{"upper-case name", "Disk", valid(), "name", `"Disk" is not a valid name`},
		{"name ends with dash", "disk-", valid(), "name", "not a valid name"},
		{"long name", strings.Repeat("a", 254), valid(), "name", "at most 253 characters, got 254"},
		{"no spec", "disk", nil, "spec", "required"},
		{"no command", "disk", with(func(s *unyov1.CheckSpec) { s.Command = nil }), "spec.command", "required"},
		{"empty first word", "disk", with(func(s *unyov1.CheckSpec) { s.Command = []string{" ", "-w"} }), "spec.command[0]", "must name the plugin"},
		{"command line in one string", "disk", with(func(s *unyov1.CheckSpec) { s.Command = []string{"check_disk -w 20%"} }), "spec.command[0]", "argv list"},
		{"NUL in argument", "disk", with(func(s *unyov1.CheckSpec) { s.Command = []string{"check_disk", "a\x00b"} }), "spec.command[1]", "NUL"},
		{"bad interval", "disk", with(func(s *unyov1.CheckSpec) { s.Interval = "5x" }), "spec.interval", `invalid duration "5x" (expected a Go duration such as 30s or 5m)`},
		{"sub-second interval", "disk", with(func(s *unyov1.CheckSpec) { s.Interval = "500ms" }), "spec.interval", `must be at least 1s, got "500ms"`},
		{"negative interval", "disk", with(func(s *unyov1.CheckSpec) { s.Interval = "-1m" }), "spec.interval", "at least 1s"},
		{"no schedule", "disk", with(func(s *unyov1.CheckSpec) { s.Interval = "" }), "spec.interval", "or spec.cron"},
		{"both schedules", "disk", with(func(s *unyov1.CheckSpec) { s.Cron = "@hourly" }), "spec.cron", "cannot be combined with spec.interval"},
		{"cron field count", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "* * *" }), "spec.cron", `invalid schedule "* * *"`},
		{"cron seconds field", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "0 * * * * *" }), "spec.cron", "expected 5 fields"},
		{"cron out of range", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "61 * * * *" }), "spec.cron", "invalid schedule"},
		{"cron zero step", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "*/0 * * * *" }), "spec.cron", "invalid schedule"},
		{"cron never fires", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "0 0 30 2 *" }), "spec.cron", "never fires"},
		{"cron bad descriptor", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "@fortnightly" }), "spec.cron", "unrecognized descriptor"},
		{"cron sub-second every", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "@every 100ms" }), "spec.cron", "at least 1s"},
		{"cron fractional every", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "@every 1500ms" }), "spec.cron", "whole number of seconds"},
		{"cron zone without schedule", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "CRON_TZ=UTC" }), "spec.cron", "must be followed by a schedule"},
		{"cron unknown zone", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron = "", "CRON_TZ=Mars/Olympus 0 * * * *" }), "spec.cron", "invalid schedule"},
		{"bad timeout", "disk", with(func(s *unyov1.CheckSpec) { s.Timeout = "soon" }), "spec.timeout", `invalid duration "soon"`},
		{"zero timeout", "disk", with(func(s *unyov1.CheckSpec) { s.Timeout = "0s" }), "spec.timeout", "must be positive"},
		{"huge timeout", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Timeout = "2h", "61m" }), "spec.timeout", "at most 1h0m0s"},
		{"timeout over interval", "disk", with(func(s *unyov1.CheckSpec) { s.Timeout = "2m" }), "spec.timeout", `"2m" is longer than spec.interval "1m"`},
		{"timeout status", "disk", with(func(s *unyov1.CheckSpec) { s.TimeoutStatus = "warning" }), "spec.timeout_status", `must be "unknown" or "critical", got "warning"`},
		{"negative occurrences", "disk", with(func(s *unyov1.CheckSpec) { s.Occurrences = -1 }), "spec.occurrences", "at least 1"},
		{"bad reissue", "disk", with(func(s *unyov1.CheckSpec) { s.Reissue = "1 hour" }), "spec.reissue", "invalid duration"},
		{"negative reissue", "disk", with(func(s *unyov1.CheckSpec) { s.Reissue = "-1m" }), "spec.reissue", "must not be negative"},
		{"bad ttl", "disk", with(func(s *unyov1.CheckSpec) { s.Ttl = "a while" }), "spec.ttl", "invalid duration"},
		{"ttl not over interval", "disk", with(func(s *unyov1.CheckSpec) { s.Ttl = "1m" }), "spec.ttl", `"1m" must be longer than spec.interval "1m"`},
		{"negative ttl", "disk", with(func(s *unyov1.CheckSpec) { s.Interval, s.Cron, s.Ttl = "", "@hourly", "-1h" }), "spec.ttl", "must be positive"},
		{"ttl of a metric check", "disk", with(func(s *unyov1.CheckSpec) {
			s.Command, s.Metric, s.Ttl = nil, &unyov1.MetricCheck{Expr: "up", Critical: "1"}, "5m"
		}), "spec.ttl", "only checks agents run"},
		{"empty selector label", "disk", with(func(s *unyov1.CheckSpec) { s.NodeSelector = map[string]string{"": "x"} }), "spec.node_selector", "label name is empty"},
		{"env name with =", "disk", with(func(s *unyov1.CheckSpec) { s.Env = map[string]string{"A=B": "x"} }), `spec.env["A=B"]`, "must not contain '='"},
		{"env empty name", "disk", with(func(s *unyov1.CheckSpec) { s.Env = map[string]string{"": "x"} }), "spec.env", "variable name is empty"},
		{"env NUL value", "disk", with(func(s *unyov1.CheckSpec) { s.Env = map[string]string{"A": "x\x00"} }), `spec.env["A"]`, "NUL"},
		{"unknown level", "disk", with(func(s *unyov1.CheckSpec) { s.UnknownLevel = "success" }), "spec.unknown_level", `must be "critical" or "warning"`},
		{"unknown metrics format", "disk", with(func(s *unyov1.CheckSpec) { s.MetricsFormat = "json" }), "spec.metrics_format", `"json" is not a metrics format; use one of nagios, prometheus, influx, graphite, opentsdb`},
		{"metrics format of a plugin check", "disk", with(func(s *unyov1.CheckSpec) {
			s.Command, s.Plugin, s.MetricsFormat = nil, &unyov1.PluginCheck{Name: "tcp"}, "influx"
		}), "spec.metrics_format", "only a command check prints metrics; spec.plugin reports its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := checks.Compile(check(tt.checkName, tt.spec))
			if err == nil {
				t.Fatalf("Compile succeeded: %+v", d)
			}
			var ve *checks.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T is not a *ValidationError: %v", err, err)
			}
			if len(ve.Fields) != 1 {
				t.Fatalf("want exactly one field error, got:\n%v", err)
			}
			f := ve.Fields[0]
			if f.Field != tt.field || !strings.Contains(f.Description, tt.contains) {
				t.Errorf("got %s: %s\nwant %s: ...%s...", f.Field, f.Description, tt.field, tt.contains)
			}
			if ve.Check != tt.checkName {
				t.Errorf("Check = %q, want %q", ve.Check, tt.checkName)
			}
		})
	}
}

func TestCompileCollectsEveryError(t *testing.T) {
	_, err := checks.Compile(check("disk", &unyov1.CheckSpec{
		Interval:      "5x",
		Timeout:       "-1s",
		TimeoutStatus: "maybe",
		UnknownLevel:  "loud",
	}))
	want := `check "disk": spec.command: required: the plugin's argv, such as [check_disk, -w, 20%]
check "disk": spec.interval: invalid duration "5x" (expected a Go duration such as 30s or 5m)
check "disk": spec.timeout: must be positive, got "-1s"
check "disk": spec.timeout_status: must be "unknown" or "critical", got "maybe"
check "disk": spec.unknown_level: must be "critical" or "warning", got "loud"`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestCompileUnnamed(t *testing.T) {
	_, err := checks.Compile(nil)
	want := "unnamed check: name: required\nunnamed check: spec: required: a check needs at least spec.command and spec.interval or spec.cron"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestCompileCopiesInput(t *testing.T) {
	spec := &unyov1.CheckSpec{Command: []string{"check_x"}, Interval: "1m", Env: map[string]string{"A": "1"}}
	c := check("x", spec)
	c.Labels = map[string]string{"team": "storage"}
	d, err := checks.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	spec.Command[0] = "changed"
	spec.Env["A"] = "2"
	c.Labels["team"] = "changed"
	// The check's labels are kept: its results carry them.
	if d.Command[0] != "check_x" || d.Env["A"] != "1" || d.Labels["team"] != "storage" {
		t.Errorf("Definition shares memory with the message: %+v", d)
	}
}

// FuzzCompile guards the API server: no input may panic (the cron parser
// does on some), and anything accepted must be usable by the scheduler.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"* * * * *", "CRON_TZ=UTC", "TZ=", "@every", "@every -1s", "*/0 * * * *", "0-70/3 * * * *", "? ? ? ? ?"} {
		f.Add("x", s, "")
	}
	f.Add("x", "", "1m")
	f.Fuzz(func(t *testing.T, name, cronSpec, interval string) {
		d, err := checks.Compile(check(name, &unyov1.CheckSpec{Command: []string{"check_x"}, Cron: cronSpec, Interval: interval}))
		if err != nil {
			return
		}
		switch {
		case d.Schedule != nil:
			now := time.Now()
			if next := d.Schedule.Next(now); !next.After(now) {
				t.Errorf("schedule %q: Next(%v) = %v", cronSpec, now, next)
			}
		case d.Interval < checks.MinInterval:
			t.Errorf("interval %q compiled to %v", interval, d.Interval)
		}
	})
}
