package manifest

import (
	"fmt"
	"strings"
)

// Error is one problem in a manifest, located so that an operator can find
// it without knowing protobuf:
//
//	checks.yaml: document 2 (line 14), Check "disk": spec.intervall: unknown field (known fields: command, interval, ...)
type Error struct {
	// Source is the file name given to Decode, or the "where" given to
	// DecodeDocument/DecodeCheck.
	Source string
	// Document is the 1-based number of the YAML document in the file; 0
	// when the object did not come from a file.
	Document int
	// Line is the 1-based line of the offending node; 0 if unknown.
	Line int
	// Object names the object once known, e.g. `Check "disk"`.
	Object string
	// Path is the field path, e.g. "spec.command[1]"; empty for problems of
	// the document as a whole.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	switch {
	case e.Document > 0 && e.Line > 0:
		fmt.Fprintf(&b, ": document %d (line %d)", e.Document, e.Line)
	case e.Document > 0:
		fmt.Fprintf(&b, ": document %d", e.Document)
	case e.Line > 0:
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Object != "" {
		b.WriteString(", ")
		b.WriteString(e.Object)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one file (or one embedded document),
// in file order. Decode returns it so that an operator fixes a file in one
// round instead of one error per run.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// err returns the list as an error, or nil when it is empty (never a typed
// nil inside a non-nil interface).
func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
