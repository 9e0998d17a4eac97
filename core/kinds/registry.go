package kinds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
)

// Tier is the server that owns a kind's objects and stores them.
type Tier string

const (
	// RootTier objects are stored by root (a Region spans clusters).
	RootTier Tier = "root"
	// ClusterTier objects are stored by the cluster they name; root forwards
	// them, and one naming no cluster goes to every cluster.
	ClusterTier Tier = "cluster"
)

// LabelSet is one label map of an object, checked against the label limits.
type LabelSet struct {
	Field  string // as operators write it: "spec.node_selector"
	Labels map[string]string
}

// Column is one column of a kind's table in `unyo get`. An empty cell
// prints as "-"; Width, if set, cuts longer cells.
type Column struct {
	Header string
	Width  int
	Cell   func(m proto.Message, now time.Time) string
}

// Spec declares a kind whose message is M; Define turns it into a Kind.
type Spec[M proto.Message] struct {
	// Noun is the CLI command of the kind (`unyo rules ls`), Help its
	// one-line description.
	Noun, Help string
	// Everywhere kinds are configuration every cluster should have: an
	// object applied without a cluster is kept by root and brought to
	// every cluster, those registering later too, and deleted from them
	// when it is deleted at root. Their message needs a string field
	// origin. Other kinds applied without a cluster go to the clusters
	// registered at the time.
	Everywhere bool
	// Aliases are other spellings on the command line besides the name,
	// its plural and the noun, case-insensitive ("rule" for EventRule).
	Aliases []string
	Owner   Tier
	// Validate checks an object before anything is stored; now is the
	// server's clock, for kinds that judge times.
	Validate func(m M, now time.Time) error
	// Labels are the object's label maps other than its top-level labels
	// (which every kind's are checked).
	Labels func(m M) []LabelSet
	// Prepare, if set, fills in what the server decides before storing
	// (a Check applied through the API is "central").
	Prepare func(m M)
	// Refs, if set, returns the references an object makes to others
	// (a Rack to its Floor); references with an empty name are optional
	// ones left out.
	Refs func(m M) []Reference
	// Rules, if set, judge the batch's objects of the kind against the
	// objects they touch, on the state the apply would leave (view),
	// inside the apply's transaction and after every reference resolved.
	// They get the whole batch so that thousands of objects share what
	// they read. Each broken rule is a *RuleError; errors.Join several.
	Rules func(ctx context.Context, batch []M, view View) error
	// Count, if set, names the field showing the count the store keeps
	// beside the object (rules' matched events); the server fills it in
	// on reads and never stores what a client sent in it.
	Count protoreflect.Name
	// Columns lay out the kind's table; without them a table shows KIND,
	// NAME and CLUSTER.
	Columns []TypedColumn[M]
}

// TypedColumn is a Column over the kind's own message.
type TypedColumn[M proto.Message] struct {
	Header string
	Width  int
	Cell   func(m M, now time.Time) string
}

// Kind is one declared kind. Build it with Define.
type Kind struct {
	Name       string
	Noun       string
	Help       string
	Everywhere bool
	Aliases    []string
	Owner      Tier
	Count      protoreflect.Name
	Columns    []Column
	msgType    protoreflect.MessageType
	validate   func(m proto.Message, now time.Time) error
	labels     func(m proto.Message) []LabelSet
	prepare    func(m proto.Message)
	refs       func(m proto.Message) []Reference
	rules      func(ctx context.Context, batch []proto.Message, v View) error
}

// Define declares the kind whose message is M, named after the message.
func Define[M proto.Message](s Spec[M]) Kind {
	var zero M
	k := Kind{
		Name:       string(zero.ProtoReflect().Descriptor().Name()),
		Noun:       s.Noun,
		Help:       s.Help,
		Everywhere: s.Everywhere,
		Aliases:    s.Aliases,
		Owner:      s.Owner,
		Count:      s.Count,
		msgType:    zero.ProtoReflect().Type(),
	}
	if s.Validate != nil {
		k.validate = func(m proto.Message, now time.Time) error { return s.Validate(m.(M), now) }
	}
	if s.Labels != nil {
		k.labels = func(m proto.Message) []LabelSet { return s.Labels(m.(M)) }
	}
	if s.Refs != nil {
		k.refs = func(m proto.Message) []Reference { return s.Refs(m.(M)) }
	}
	if s.Rules != nil {
		k.rules = func(ctx context.Context, batch []proto.Message, v View) error {
			typed := make([]M, len(batch))
			for i, m := range batch {
				typed[i] = m.(M)
			}
			return s.Rules(ctx, typed, v)
		}
	}
	if s.Prepare != nil {
		k.prepare = func(m proto.Message) { s.Prepare(m.(M)) }
	}
	for _, c := range s.Columns {
		k.Columns = append(k.Columns, Column{Header: c.Header, Width: c.Width,
			Cell: func(m proto.Message, now time.Time) string { return c.Cell(m.(M), now) }})
	}
	return k
}

// Type is the kind's message type.
func (k Kind) Type() protoreflect.MessageType { return k.msgType }

// New returns an empty message of the kind, wrapped in an Object.
func (k Kind) New() (*unyov1.Object, proto.Message) {
	o, m, _ := NewObject(k.Name) // New made sure the kind is a member
	return o, m
}

// Registry is an immutable set of kinds, in the order they are listed to
// operators.
type Registry struct {
	kinds []Kind
}

// New builds a registry. Every kind's message must be a member of
// Object's oneof, and a name or alias may be declared once.
func New(ks ...Kind) (*Registry, error) {
	r := &Registry{}
	seen := map[string]string{}
	for _, k := range ks {
		if k.msgType == nil {
			return nil, errors.New("kinds: a kind not built with Define")
		}
		if member(k.msgType.Descriptor()) == nil {
			return nil, fmt.Errorf("kinds: %s is not a member of unyo.v1.Object's oneof kind; add it there", k.Name)
		}
		if k.Owner != RootTier && k.Owner != ClusterTier {
			return nil, fmt.Errorf("kinds: %s: owner %q is neither root nor cluster", k.Name, k.Owner)
		}
		if k.Everywhere {
			if f := k.msgType.Descriptor().Fields().ByName("origin"); f == nil || f.Kind() != protoreflect.StringKind || f.IsList() {
				return nil, fmt.Errorf("kinds: %s is kept for every cluster but its message has no string field origin", k.Name)
			}
		}
		if k.Count != "" {
			if f := k.msgType.Descriptor().Fields().ByName(k.Count); f == nil || f.Kind() != protoreflect.Int64Kind || f.IsList() {
				return nil, fmt.Errorf("kinds: %s: count field %q is not an int64 field of its message", k.Name, k.Count)
			}
		}
		for _, s := range k.spellings() {
			if other, dup := seen[s]; dup {
				return nil, fmt.Errorf("kinds: %s and %s are both spelled %q", other, k.Name, s)
			}
			seen[s] = k.Name
		}
		r.kinds = append(r.kinds, k)
	}
	return r, nil
}

// spellings are the lower-case words naming the kind on a command line.
func (k Kind) spellings() []string {
	words := []string{strings.ToLower(k.Name), strings.ToLower(k.Name) + "s"}
	if k.Noun != "" {
		words = append(words, strings.ToLower(k.Noun))
	}
	for _, a := range k.Aliases {
		words = append(words, strings.ToLower(a))
	}
	slices.Sort(words)
	return slices.Compact(words)
}

// Kinds returns the registered kinds in listing order.
func (r *Registry) Kinds() []Kind { return slices.Clone(r.kinds) }

// Names returns the names of the registered kinds, e.g. ["Check"].
func (r *Registry) Names() []string {
	names := make([]string, len(r.kinds))
	for i, k := range r.kinds {
		names[i] = k.Name
	}
	return names
}

// Known lists the names for error messages: "Check, EventRule".
func (r *Registry) Known() string { return strings.Join(r.Names(), ", ") }

// Lookup returns the kind spelled exactly name, as documents must.
func (r *Registry) Lookup(name string) (Kind, bool) {
	for _, k := range r.kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Parse resolves a kind as typed on a command line ("check", "checks",
// "Check", an alias) to its kind.
func (r *Registry) Parse(s string) (Kind, error) {
	low := strings.ToLower(s)
	for _, k := range r.kinds {
		if slices.Contains(k.spellings(), low) {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("unknown kind %q (known kinds: %s)", s, r.Known())
}

// Of returns the kind of an object and its message; ok is false when the
// object holds nothing or a kind this registry lacks.
func (r *Registry) Of(o *unyov1.Object) (k Kind, m proto.Message, ok bool) {
	m = Message(o)
	if m == nil {
		return Kind{}, nil, false
	}
	k, ok = r.Lookup(string(m.ProtoReflect().Descriptor().Name()))
	return k, m, ok
}

// Validate checks objects before anything is written, so that an apply
// with one bad document changes nothing; now is the server's clock. The
// error names every bad object.
func (r *Registry) Validate(objs []*unyov1.Object, now time.Time) error {
	var errs []string
	for i, o := range objs {
		k, m, ok := r.Of(o)
		if !ok {
			errs = append(errs, fmt.Sprintf("objects[%d]: no kind set", i))
			continue
		}
		if k.validate != nil {
			if err := k.validate(m, now); err != nil {
				errs = append(errs, fmt.Sprintf("objects[%d]: %v", i, err))
			}
		}
		if err := k.checkLabels(m); err != nil {
			errs = append(errs, fmt.Sprintf("objects[%d] (%s %q): %v", i, k.Name, limits.Abbrev(Name(o)), err))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// checkLabels bounds the label maps, which the kinds' own validation
// leaves unbounded.
func (k Kind) checkLabels(m proto.Message) error {
	sets := []LabelSet{{Field: "labels"}}
	if f := m.ProtoReflect().Descriptor().Fields().ByName("labels"); f != nil && f.IsMap() {
		top := map[string]string{}
		m.ProtoReflect().Get(f).Map().Range(func(key protoreflect.MapKey, v protoreflect.Value) bool {
			top[key.String()] = v.String()
			return true
		})
		sets[0].Labels = top
	}
	if k.labels != nil {
		sets = append(sets, k.labels(m)...)
	}
	for _, s := range sets {
		if err := limits.Labels(s.Field, s.Labels); err != nil {
			return err
		}
	}
	return nil
}

// Prepare readies objects for storing: it fills in what the server
// decides and clears the count fields, which only the store sets.
func (r *Registry) Prepare(objs []*unyov1.Object) {
	for _, o := range objs {
		k, m, ok := r.Of(o)
		if !ok {
			continue
		}
		if k.Count != "" {
			m.ProtoReflect().Clear(m.ProtoReflect().Descriptor().Fields().ByName(k.Count))
		}
		if k.prepare != nil {
			k.prepare(m)
		}
	}
}

// ShowCount sets the object's count field (if its kind has one) to n.
func (r *Registry) ShowCount(o *unyov1.Object, n int64) {
	k, m, ok := r.Of(o)
	if !ok || k.Count == "" {
		return
	}
	m.ProtoReflect().Set(m.ProtoReflect().Descriptor().Fields().ByName(k.Count), protoreflect.ValueOfInt64(n))
}
