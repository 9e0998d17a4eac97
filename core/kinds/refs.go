package kinds

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
)

// Reference is one reference an object makes through one of its fields: the
// field as operators write it ("spec.floor") and the object it names. The
// server refuses an apply naming an object that exists neither in the
// batch nor in the store, and a delete of an object still referred to.
type Reference struct {
	Field, Kind, Name string
}

// Referrer is one reference made to an object: who makes it and through
// which field.
type Referrer struct {
	Kind, Name, Field string
}

// View is the state an apply would leave, the batch over the store, as
// the kinds' Rules read it. Reads inside the apply's transaction see no
// concurrent change.
type View interface {
	// Get returns the object of kind named name, or nil if there is none.
	Get(ctx context.Context, kind, name string) (proto.Message, error)
	// Referrers returns the references made to an object.
	Referrers(ctx context.Context, kind, name string) ([]Referrer, error)
}

// RuleError is an object breaking a rule across objects; the server
// reports it as invalid input, not as its own failure.
type RuleError struct {
	Kind, Name, Field, Reason string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%s %q: %s: %s", e.Kind, e.Name, e.Field, e.Reason)
}

// Refs returns the references m makes; nil for kinds without any.
func (k Kind) Refs(m proto.Message) []Reference {
	if k.refs == nil {
		return nil
	}
	var out []Reference
	for _, r := range k.refs(m) {
		if r.Name != "" { // an optional reference left out
			out = append(out, r)
		}
	}
	return out
}

// HasRules says whether the kind judges its objects against others.
func (k Kind) HasRules() bool { return k.rules != nil }

// maxRuleErrors bounds the errors one apply reports: a bad generated
// inventory would otherwise list thousands.
const maxRuleErrors = 20

// CheckRules runs the rules of the kinds of objs on the state v, and
// returns every broken one (up to a bound) as one error; nil when all
// hold. An error that is not a *RuleError (a failed read) ends the check.
func (r *Registry) CheckRules(ctx context.Context, objs []proto.Message, v View) error {
	byKind := map[string][]proto.Message{}
	var order []Kind
	for _, m := range objs {
		k, ok := r.Lookup(string(m.ProtoReflect().Descriptor().Name()))
		if !ok || k.rules == nil {
			continue
		}
		if _, seen := byKind[k.Name]; !seen {
			order = append(order, k)
		}
		byKind[k.Name] = append(byKind[k.Name], m)
	}
	var broken []string
	for _, k := range order {
		err := k.rules(ctx, byKind[k.Name], v)
		if err == nil {
			continue
		}
		var joined interface{ Unwrap() []error }
		errs := []error{err}
		if errors.As(err, &joined) {
			errs = joined.Unwrap()
		}
		for _, e := range errs {
			var re *RuleError
			if !errors.As(e, &re) {
				return e
			}
			broken = append(broken, re.Error())
		}
	}
	if len(broken) == 0 {
		return nil
	}
	if len(broken) > maxRuleErrors {
		broken = append(broken[:maxRuleErrors], fmt.Sprintf("(and %d more)", len(broken)-maxRuleErrors))
	}
	return &RulesError{Broken: broken}
}

// RulesError lists the rules an apply breaks, one per line.
type RulesError struct {
	Broken []string
}

func (e *RulesError) Error() string { return strings.Join(e.Broken, "\n") }
