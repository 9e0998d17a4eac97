// Package validate holds what the validation of every object kind shares:
// the FieldError an invalid field becomes, the collector of them, and the
// name rule of checks, nodes, clusters, rules and maintenances. It imports
// only the standard library, so domain packages (checks, eventrules,
// maintenance, alerts) can use it without pulling in anything else.
package validate

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// MaxNameLength is the longest name (a DNS subdomain's limit).
const MaxNameLength = 253

// DurationHint follows an invalid duration in every error.
const DurationHint = "(expected a Go duration such as 30s or 5m)"

// FieldError is one invalid field. Its two fields match
// google.rpc.BadRequest.FieldViolation so the API layer can copy them into
// an InvalidArgument status.
type FieldError struct {
	// Field is the path as the operator wrote it, using the schema's field
	// names: "name", "spec.interval", "spec.command[0]", `spec.env["A=B"]`.
	Field       string
	Description string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Description }

// Message lists fields one per line, each starting with the object's kind
// and name (`check "disk": `, or `unnamed check: `), so that it still reads
// well when log lines are split.
func Message(kind, name string, fields []FieldError) string {
	prefix := fmt.Sprintf("%s %q: ", kind, name)
	if name == "" {
		prefix = "unnamed " + kind + ": "
	}
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(prefix)
		b.WriteString(f.Error())
	}
	return b.String()
}

// Fields collects every invalid field of one object, so that an operator
// fixes them all in one round trip.
type Fields []FieldError

// Error is every invalid field of one object, named by its kind and name
// as operators write them ("rack", "r1").
type Error struct {
	Kind, Name string
	Fields     []FieldError
}

func (e *Error) Error() string { return Message(e.Kind, e.Name, e.Fields) }

// Err returns the fields as an *Error of the object kind and name, or nil
// (not a typed nil pointer) when every field is valid.
func (f Fields) Err(kind, name string) error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Kind: kind, Name: name, Fields: f}
}

// Add records that field is invalid, and why.
func (f *Fields) Add(field, desc string) {
	*f = append(*f, FieldError{Field: field, Description: desc})
}

// Addf is Add with a format.
func (f *Fields) Addf(field, format string, args ...any) {
	f.Add(field, fmt.Sprintf(format, args...))
}

// Duration parses raw as a Go duration, recording field as invalid when it
// is not one.
func (f *Fields) Duration(field, raw string) (time.Duration, bool) {
	d, err := time.ParseDuration(raw)
	if err != nil {
		f.Addf(field, "invalid duration %q %s", raw, DurationHint)
		return 0, false
	}
	return d, true
}

// Name records field as invalid when name breaks the name rule (see Name).
func (f *Fields) Name(field, name string) {
	if err := Name(name); err != nil {
		f.Add(field, err.Error())
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`)

// Name checks a name: 1 to MaxNameLength lowercase letters, digits, '-',
// '_' and '.', starting and ending with a letter or digit. Checks, nodes,
// clusters, event rules and maintenances follow this rule. The error does
// not name the field, so callers prefix it ("node.name: ...").
func Name(name string) error {
	switch {
	case name == "":
		return errors.New("required")
	case len(name) > MaxNameLength:
		return fmt.Errorf("must be at most %d characters, got %d", MaxNameLength, len(name))
	case !nameRE.MatchString(name):
		return fmt.Errorf("%q is not a valid name: use lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit", name)
	}
	return nil
}

// EnvName checks the name of an environment variable a check or plugin is
// given: not empty, and without '=' or a NUL byte, which an environment
// entry ("NAME=value") cannot hold. The error does not name the variable.
func EnvName(name string) error {
	switch {
	case name == "":
		return errors.New("a variable name is empty")
	case strings.ContainsAny(name, "=\x00"):
		return errors.New("a variable name must not contain '=' or a NUL byte")
	}
	return nil
}
