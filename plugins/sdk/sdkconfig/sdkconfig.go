// Package sdkconfig is the part of the plugin SDK that decodes and checks
// configurations: Decode, Duration and ConfigError. It stands apart from
// package sdk, which re-exports it, so that the agent (which decodes load
// balancer configurations with it) does not link the SDK's JSON Schema
// compiler, whose init compiles every draft's meta-schema: 1.7 MB of heap
// and 20 ms on every node.
package sdkconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ConfigError reports config or request fields that are wrong; it becomes
// INVALID_ARGUMENT with a google.rpc.BadRequest detail.
type ConfigError struct {
	Violations []Violation
}

// Violation is one wrong field.
type Violation struct {
	Field       string
	Description string
}

func (e *ConfigError) Error() string {
	if len(e.Violations) == 0 {
		return "invalid configuration"
	}
	s := "invalid configuration:"
	for i, v := range e.Violations {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %s: %s", v.Field, v.Description)
	}
	return s
}

// Invalid returns a *ConfigError for one field.
func Invalid(field, format string, args ...any) error {
	return &ConfigError{Violations: []Violation{{Field: field, Description: fmt.Sprintf(format, args...)}}}
}

// Decode fills out (a pointer to a struct with json tags) from a config or
// target map, refusing unknown fields; problems come back as *ConfigError
// naming the field, ready to return from Configure, Validate or Check.
func Decode(m map[string]any, out any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return &ConfigError{Violations: []Violation{{Field: "", Description: err.Error()}}}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return Invalid(te.Field, "must be %s, not %s", te.Type, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return Invalid(f, "is not a known field")
		}
		return Invalid("", "%v", err)
	}
	return nil
}

// Duration is a config duration written as "1.5s" or as seconds.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		*d = Duration(x * float64(time.Second))
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("duration %q: %w", x, err)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("duration must be a string like \"1.5s\" or seconds")
	}
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
