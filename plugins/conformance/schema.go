package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles a plugin's JSON Schema, which validates it against
// its draft's meta-schema (2020-12 unless it names another in $schema):
// json.Valid alone lets `"type": "objekt"` through.
func compileSchema(doc string) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	const url = "plugin-config-schema.json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// validateAgainst checks a fixture value against a compiled schema. The
// value goes through JSON first, as the host sends it: YAML integers
// become JSON numbers.
func validateAgainst(s *jsonschema.Schema, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}
