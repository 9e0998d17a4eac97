package conformance

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Fixtures are the per-kind inputs the cases need: what only someone who
// knows the plugin can say (a target that is OK, a config that is wrong).
// Cases whose inputs are missing are skipped, naming the missing fixture.
//
// String values may contain placeholders that the harness replaces for each
// run, so that one static file works anywhere:
//
//	{{tempdir}}     a directory made for the run and removed after it
//	{{http}}        base URL of a harness HTTP server: /ok answers 200 "ok",
//	                /status/NNN answers NNN, /slow?ms=N answers after N ms,
//	                /hang answers only when the client gives up
//	{{tcp_echo}}    host:port answering "hello\n" to anything
//	{{tcp_silent}}  host:port that accepts and never answers
//	{{tcp_closed}}  host:port where nothing listens
//	{{smtp}}        host:port of a harness SMTP server (no TLS, no AUTH)
//	                that appends one line per accepted message to
//	                {{tempdir}}/smtp-messages; RCPT TO a local part "hang"
//	                is answered only when the client gives up, "tempfail"
//	                gets 451, "reject" 550
type Fixtures struct {
	// Config is a valid plugin-wide config.
	Config map[string]any `yaml:"config" json:"config"`
	// InvalidConfig must be refused with INVALID_ARGUMENT.
	InvalidConfig map[string]any   `yaml:"invalid_config" json:"invalid_config"`
	Check         CheckFixtures    `yaml:"check" json:"check"`
	Action        ActionFixtures   `yaml:"action" json:"action"`
	Provider      ProviderFixtures `yaml:"provider" json:"provider"`
}

// CheckFixtures are check targets.
type CheckFixtures struct {
	// Statuses maps "ok", "warning", "critical" and "unknown" to a target
	// that yields that status; each given one is a case.
	Statuses map[string]map[string]any `yaml:"statuses" json:"statuses"`
	// Slow is a target that takes longer than a second, for the timeout,
	// deadline and cancellation cases.
	Slow map[string]any `yaml:"slow" json:"slow"`
	// Invalid is a target refused with INVALID_ARGUMENT.
	Invalid map[string]any `yaml:"invalid" json:"invalid"`
	// Large is a target whose output is longer than 64 KiB, for the
	// output bound.
	Large map[string]any `yaml:"large" json:"large"`
}

// ActionFixtures are action params.
type ActionFixtures struct {
	// Params make an action that succeeds quickly.
	Params map[string]any `yaml:"params" json:"params"`
	// Slow params make an action that takes longer than a second.
	Slow map[string]any `yaml:"slow" json:"slow"`
	// EffectsFile is a file the action (not a dry run) appends one line to
	// each time it acts, so that the harness can count side effects.
	EffectsFile string `yaml:"effects_file" json:"effects_file"`
}

// ProviderFixtures are resource configs.
type ProviderFixtures struct {
	// Resource is a valid config of a resource that keeps running.
	Resource map[string]any `yaml:"resource" json:"resource"`
	// Other is another valid config, for the conflicting-create case.
	Other map[string]any `yaml:"other" json:"other"`
	// Invalid is a config Validate refuses.
	Invalid map[string]any `yaml:"invalid" json:"invalid"`
	// Failing passes Validate (or not) but makes Create fail.
	Failing map[string]any `yaml:"failing" json:"failing"`
}

// LoadFixtures reads fixtures from a YAML or JSON file.
func LoadFixtures(path string) (*Fixtures, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fixtures: %w", err)
	}
	var fx Fixtures
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&fx); err != nil {
		return nil, fmt.Errorf("fixtures %s: %w", path, err)
	}
	return &fx, nil
}

// expand returns a copy of fx with the placeholders replaced.
func (fx *Fixtures) expand(vars map[string]string) *Fixtures {
	if fx == nil {
		fx = &Fixtures{}
	}
	r := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		r = append(r, "{{"+k+"}}", v)
	}
	rep := strings.NewReplacer(r...)
	m := func(in map[string]any) map[string]any {
		if in == nil {
			return nil
		}
		return expandValue(in, rep).(map[string]any)
	}
	out := &Fixtures{
		Config: m(fx.Config), InvalidConfig: m(fx.InvalidConfig),
		Check:  CheckFixtures{Slow: m(fx.Check.Slow), Invalid: m(fx.Check.Invalid), Large: m(fx.Check.Large)},
		Action: ActionFixtures{Params: m(fx.Action.Params), Slow: m(fx.Action.Slow), EffectsFile: rep.Replace(fx.Action.EffectsFile)},
		Provider: ProviderFixtures{Resource: m(fx.Provider.Resource), Other: m(fx.Provider.Other),
			Invalid: m(fx.Provider.Invalid), Failing: m(fx.Provider.Failing)},
	}
	if fx.Check.Statuses != nil {
		out.Check.Statuses = map[string]map[string]any{}
		for k, v := range fx.Check.Statuses {
			out.Check.Statuses[k] = m(v)
		}
	}
	return out
}

// expandValue copies v, replacing placeholders in strings and turning
// YAML's map[any]any-free output into structpb-friendly values.
func expandValue(v any, rep *strings.Replacer) any {
	switch x := v.(type) {
	case string:
		return rep.Replace(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = expandValue(e, rep)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = expandValue(e, rep)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return v
}
