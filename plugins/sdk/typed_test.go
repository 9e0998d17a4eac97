package sdk

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

type typedTarget struct {
	Path  string   `json:"path" required:"true" doc:"a file"`
	Max   Duration `json:"max" default:"5m"`
	Count int      `json:"count" default:"3"`
	Tags  []string `json:"tags"`
}

func TestCheckTyped(t *testing.T) {
	p := &Check[struct{}, typedTarget]{Name: "typed", Version: "0.1.0",
		Run: func(_ context.Context, _ struct{}, tt typedTarget) (CheckResult, error) {
			return Result(OK, "%s %s %d", tt.Path, time.Duration(tt.Max), tt.Count), nil
		}}
	if _, err := CompileSchema(p.ConfigSchema()); err != nil {
		t.Fatalf("derived config schema %s: %v", p.ConfigSchema(), err)
	}
	if err := p.Configure(t.Context(), map[string]any{"nope": 1.0}); err == nil {
		t.Errorf("Configure accepted an unknown field")
	}
	if err := p.Configure(t.Context(), nil); err != nil {
		t.Fatalf("Configure with nothing: %v", err)
	}
	for _, tt := range []struct {
		name      string
		target    map[string]any
		want, bad string // output, or the field an error names
	}{
		{"defaults", map[string]any{"path": "/x"}, "/x 5m0s 3", ""},
		{"given", map[string]any{"path": "/x", "max": "1s", "count": 7.0}, "/x 1s 7", ""},
		{"missing required", map[string]any{}, "", "path"},
		{"wrong type", map[string]any{"path": 42.0}, "", "path"},
		{"wrong item type", map[string]any{"path": "/x", "tags": []any{1.0}}, "", "tags.0"},
		{"unknown field", map[string]any{"path": "/x", "colour": "red"}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := p.Check(t.Context(), CheckRequest{Target: tt.target})
			if tt.want != "" {
				if err != nil || r.Output != tt.want {
					t.Fatalf("got %q %v, want %q", r.Output, err, tt.want)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if tt.bad != "" && (len(ce.Violations) == 0 || ce.Violations[0].Field != tt.bad) {
				t.Errorf("violations %+v, want field %q", ce.Violations, tt.bad)
			}
		})
	}
}

func TestSchemaOfRefusesUnsupported(t *testing.T) {
	type bad struct {
		C chan int `json:"c"`
	}
	p := &Check[bad, struct{}]{Name: "bad", Version: "0.1.0"}
	if err := p.Configure(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "field C") {
		t.Errorf("a config struct with a channel: %v", err)
	}
}

func TestThresholdsAndPerf(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want Status
	}{{1, OK}, {10, Warning}, {15, Warning}, {20, Critical}, {30, Critical}} {
		if got := Above(tt.v, 10, 20); got != tt.want {
			t.Errorf("Above(%v, 10, 20) = %v, want %v", tt.v, got, tt.want)
		}
		if got := Below(-tt.v, -10, -20); got != tt.want {
			t.Errorf("Below(%v, -10, -20) = %v, want %v", -tt.v, got, tt.want)
		}
	}
	m := Perf("age", 1.5, "s").Thresholds(300, 900.5).AtLeast(0)
	if m.Warn != "300" || m.Crit != "900.5" || m.Min == nil || *m.Min != 0 || m.Max != nil {
		t.Errorf("perf %+v", m)
	}
	r := Result(Warning, "%d files", 3).With(m)
	if r.Status != Warning || r.Output != "3 files" || len(r.Metrics) != 1 {
		t.Errorf("result %+v", r)
	}
}
