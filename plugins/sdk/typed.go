package sdk

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// Status is a check's status: OK, Warning, Critical or Unknown.
type Status = pluginv1.CheckStatus

// Check is a whole check plugin made of one function. Config and Target
// are structs (struct{} for none): their JSON Schemas are derived from
// their fields (see SchemaOf), configs and targets are validated against
// them, defaults filled in and decoded before Run sees them.
//
//	sdk.Serve(&sdk.Check[struct{}, target]{Name: "fileage", Version: "0.1.0", Run: fileAge})
type Check[Config, Target any] struct {
	Name, Version, Description string
	// Run checks one target.
	Run func(ctx context.Context, c Config, t Target) (CheckResult, error)
	// Setup, optional, checks a decoded config beyond its schema and
	// prepares for it; an error rejects the config and keeps the previous.
	Setup func(ctx context.Context, c Config) error

	once           sync.Once
	config, target *typedSchema
	schemaErr      error

	mu  sync.Mutex
	cfg Config
}

func (p *Check[Config, Target]) schemas() error {
	p.once.Do(func() {
		if p.config, p.schemaErr = newTypedSchema(reflect.TypeFor[Config]()); p.schemaErr == nil {
			p.target, p.schemaErr = newTypedSchema(reflect.TypeFor[Target]())
		}
	})
	return p.schemaErr
}

// Info implements Plugin.
func (p *Check[Config, Target]) Info() Info {
	return Info{Name: p.Name, Version: p.Version, Description: p.Description}
}

// ConfigSchema implements Plugin: derived from Config.
func (p *Check[Config, Target]) ConfigSchema() string {
	if err := p.schemas(); err != nil {
		return "" // Configure reports the error
	}
	return p.config.text
}

// Configure implements Plugin: validates against the schema, decodes,
// runs Setup, and only then replaces the config in force.
func (p *Check[Config, Target]) Configure(ctx context.Context, m map[string]any) error {
	if err := p.schemas(); err != nil {
		return err
	}
	var c Config
	if err := p.config.decode(m, &c); err != nil {
		return err
	}
	if p.Setup != nil {
		if err := p.Setup(ctx, c); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.cfg = c
	p.mu.Unlock()
	return nil
}

// Probe implements Plugin: a configured Check is ready.
func (p *Check[Config, Target]) Probe(context.Context) (bool, string) { return true, "" }

// Check implements CheckPlugin.
func (p *Check[Config, Target]) Check(ctx context.Context, req CheckRequest) (CheckResult, error) {
	if err := p.schemas(); err != nil {
		return CheckResult{}, err
	}
	var t Target
	if err := p.target.decode(req.Target, &t); err != nil {
		return CheckResult{}, err
	}
	p.mu.Lock()
	c := p.cfg
	p.mu.Unlock()
	return p.Run(ctx, c, t)
}

// Result is a CheckResult with a formatted output.
func Result(s Status, format string, args ...any) CheckResult {
	return CheckResult{Status: s, Output: fmt.Sprintf(format, args...)}
}

// With adds perfdata.
func (r CheckResult) With(m ...Metric) CheckResult {
	r.Metrics = append(r.Metrics, m...)
	return r
}

// Above is the status of a value for which more is worse: Critical from
// crit, Warning from warn, else OK.
func Above(v, warn, crit float64) Status {
	switch {
	case v >= crit:
		return Critical
	case v >= warn:
		return Warning
	}
	return OK
}

// Below is the status of a value for which less is worse.
func Below(v, warn, crit float64) Status {
	switch {
	case v <= crit:
		return Critical
	case v <= warn:
		return Warning
	}
	return OK
}

// Perf is one perfdata item; chain Thresholds and Range to complete it.
func Perf(label string, value float64, unit string) Metric {
	return Metric{Label: label, Value: value, Unit: unit}
}

// Thresholds sets the warning and critical thresholds, formatted as
// Nagios ranges ("10" alerts above 10).
func (m Metric) Thresholds(warn, crit float64) Metric {
	m.Warn, m.Crit = formatFloat(warn), formatFloat(crit)
	return m
}

// Range sets the value's minimum and maximum.
func (m Metric) Range(lo, hi float64) Metric {
	m.Min, m.Max = &lo, &hi
	return m
}

// AtLeast sets only the minimum (0 for ages, sizes and counts).
func (m Metric) AtLeast(lo float64) Metric {
	m.Min = &lo
	return m
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
