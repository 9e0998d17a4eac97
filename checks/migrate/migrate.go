// Package migrate translates other monitoring systems' check definitions
// (Nagios object files, Sensu Go check definitions) into unyo Check
// objects. It is pure: callers read the files and print the result.
//
// What a translation cannot carry over is never dropped silently: every
// directive or field without an equivalent is a Note naming where it was,
// so that an operator reads what to do by hand.
package migrate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// File is one input file's name (for notes) and contents.
type File struct {
	Name string
	Data []byte
}

// Note is one thing the translation could not carry over, or did
// differently from the source, at Where (file:line or file: name).
type Note struct {
	Where string
	What  string
}

func (n Note) String() string { return n.Where + ": " + n.What }

// Result is a translation: the checks, and what the operator must read.
type Result struct {
	Checks []*unyov1.Check
	Notes  []Note
	// NodeLabels are the labels each source host (Nagios) should carry as
	// a node for the checks' node selectors to choose it, by host name.
	NodeLabels map[string]map[string]string
}

// Objects wraps the checks as objects, for manifest.Encode.
func (r Result) Objects() []*unyov1.Object {
	out := make([]*unyov1.Object, len(r.Checks))
	for i, c := range r.Checks {
		out[i] = &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}}
	}
	return out
}

// shellMeta are the characters for which Nagios (runcmd.c) and Sensu run a
// command line through /bin/sh -c instead of splitting it on blanks.
const shellMeta = "!$^&*()~[]\\|{};<>?`'\""

// argv turns a command line into the argv of a command check the way
// Nagios does: split on blanks, unless shell syntax needs /bin/sh.
func argv(line string) []string {
	line = strings.TrimSpace(line)
	if strings.ContainsAny(line, shellMeta) {
		return []string{"/bin/sh", "-c", line}
	}
	return strings.Fields(line)
}

var notName = regexp.MustCompile(`[^a-z0-9_.]+`)

// names hands out valid, distinct check names derived from source names.
type names map[string]bool

// of returns a valid name for s ("Current Load" → "current-load"), made
// distinct with a numeric suffix.
func (n names) of(parts ...string) string {
	s := strings.ToLower(strings.Join(parts, "-"))
	s = notName.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-_.")
	if s == "" {
		s = "check"
	}
	if len(s) > validate.MaxNameLength-4 {
		s = strings.Trim(s[:validate.MaxNameLength-4], "-_.")
	}
	name := s
	for i := 2; n[name]; i++ {
		name = fmt.Sprintf("%s-%d", s, i)
	}
	n[name] = true
	return name
}
