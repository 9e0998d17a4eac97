package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

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
