package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// CompileSchema compiles a JSON Schema document, which validates it against
// its draft's meta-schema (2020-12 unless it names another in $schema):
// `"type": "objekt"` is an error here, not only a schema that never
// matches.
func CompileSchema(doc string) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	const url = "schema.json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// ValidateSchema checks v (a config or target as the host sends it)
// against s; problems come back as *ConfigError naming each field.
func ValidateSchema(s *jsonschema.Schema, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return Invalid("", "%v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return Invalid("", "%v", err)
	}
	err = s.Validate(doc)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	p := message.NewPrinter(language.English)
	ce := &ConfigError{}
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if r, ok := e.ErrorKind.(*kind.Required); ok && len(r.Missing) == 1 {
				// Name the missing field itself, not the object lacking it.
				loc = append(slices.Clone(loc), r.Missing[0])
			}
			ce.Violations = append(ce.Violations, Violation{Field: strings.Join(loc, "."), Description: e.ErrorKind.LocalizedString(p)})
		}
		for _, c := range e.Causes {
			leaves(c)
		}
	}
	leaves(ve)
	return ce
}

// SchemaOf derives a JSON Schema from a struct type, so that the schema a
// plugin advertises cannot drift from the struct its config is decoded
// into. Field tags: `json:"name"` names the property, `doc:"..."`
// describes it, `default:"..."` gives its default (in the field's own
// syntax: "5m" for a Duration), `required:"true"` makes it required.
// Unknown properties are refused, as Decode refuses them.
func SchemaOf(t reflect.Type) (map[string]any, error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("sdk: SchemaOf(%s): want a struct", t)
	}
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		p, err := typeSchema(f.Type)
		if err != nil {
			return nil, fmt.Errorf("sdk: field %s: %w", f.Name, err)
		}
		if d := f.Tag.Get("doc"); d != "" {
			p["description"] = d
		}
		if d, ok := f.Tag.Lookup("default"); ok {
			v, err := parseDefault(f.Type, d)
			if err != nil {
				return nil, fmt.Errorf("sdk: field %s: default %q: %w", f.Name, d, err)
			}
			p["default"] = v
		}
		if f.Tag.Get("required") == "true" {
			required = append(required, name)
		}
		props[name] = p
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

var durationType = reflect.TypeFor[Duration]()

func typeSchema(t reflect.Type) (map[string]any, error) {
	if t == durationType {
		return map[string]any{"type": []any{"string", "number"}}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Slice:
		items, err := typeSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map keys must be strings, not %s", t.Key())
		}
		v, err := typeSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": v}, nil
	case reflect.Struct:
		return SchemaOf(t)
	case reflect.Pointer:
		return typeSchema(t.Elem())
	case reflect.Interface:
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("no JSON Schema for Go type %s", t)
}

// parseDefault reads a default tag as the JSON value the host would send.
func parseDefault(t reflect.Type, s string) (any, error) {
	if t == durationType {
		_, err := time.ParseDuration(s)
		return s, err
	}
	switch t.Kind() {
	case reflect.String:
		return s, nil
	case reflect.Bool:
		return strconv.ParseBool(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return strconv.ParseFloat(s, 64)
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// typedSchema is a struct's derived schema, as text and compiled.
type typedSchema struct {
	text     string
	compiled *jsonschema.Schema
	defaults map[string]any
}

func newTypedSchema(t reflect.Type) (*typedSchema, error) {
	s, err := SchemaOf(t)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c, err := CompileSchema(string(b))
	if err != nil {
		return nil, fmt.Errorf("sdk: derived schema of %s: %w", t, err)
	}
	ts := &typedSchema{text: string(b), compiled: c, defaults: map[string]any{}}
	for name, p := range s["properties"].(map[string]any) {
		if d, ok := p.(map[string]any)["default"]; ok {
			ts.defaults[name] = d
		}
	}
	return ts, nil
}

// decode validates m against the schema, fills in defaults and decodes it
// into out.
func (ts *typedSchema) decode(m map[string]any, out any) error {
	if m == nil {
		m = map[string]any{}
	}
	if err := ValidateSchema(ts.compiled, m); err != nil {
		return err
	}
	full := make(map[string]any, len(m)+len(ts.defaults))
	for k, v := range ts.defaults {
		full[k] = v
	}
	for k, v := range m {
		full[k] = v
	}
	return Decode(full, out)
}
