package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// kind is what a key holds, as far as checking it is concerned.
type kind int

const (
	kindSection   kind = iota // a nested struct: a mapping of known keys
	kindString                // string
	kindInt                   // int
	kindBool                  // bool, written true or false
	kindDuration              // time.Duration, written "10s"
	kindSize                  // Size, written 65536 or "64KiB"
	kindStrings               // []string
	kindStringMap             // map[string]string (agent.labels)
	kindChecks                // []map[string]any, kept raw (agent.checks)
	kindLogFiles              // []LogFile (agent.logs)
	kindPlugins               // []Plugin (agent.plugins.enabled)
)

// field is one key of the schema, found by reflection over Config's yaml
// tags so that the schema has a single source: the struct.
type field struct {
	key    string   // full dotted key, e.g. "agent.max_output"; "" for the top
	name   string   // last segment of key
	kind   kind     //
	want   string   // words for "expected a string <want>", from the want tag
	index  []int    // the struct field, for reflect.Value.FieldByIndex
	fields []*field // a section's keys, in struct order
}

// schema describes Config. It is rebuilt per Load (it is cheap) rather than
// cached in a package variable.
func schema() *field {
	root := &field{kind: kindSection}
	root.fields = sectionFields(reflect.TypeFor[Config](), "", nil)
	return root
}

func sectionFields(t reflect.Type, prefix string, index []int) []*field {
	var fields []*field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		f := &field{
			key:   joinKey(prefix, name),
			name:  name,
			kind:  kindOf(sf.Type),
			want:  sf.Tag.Get("want"),
			index: append(append([]int(nil), index...), i),
		}
		if f.kind == kindSection {
			f.fields = sectionFields(sf.Type, f.key, f.index)
		}
		fields = append(fields, f)
	}
	return fields
}

func kindOf(t reflect.Type) kind {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return kindDuration
	case t == reflect.TypeFor[Size]():
		return kindSize
	case t == reflect.TypeFor[[]string]():
		return kindStrings
	case t == reflect.TypeFor[map[string]string]():
		return kindStringMap
	case t == reflect.TypeFor[[]map[string]any]():
		return kindChecks
	case t == reflect.TypeFor[[]LogFile]():
		return kindLogFiles
	case t == reflect.TypeFor[[]Plugin]():
		return kindPlugins
	case t.Kind() == reflect.String:
		return kindString
	case t.Kind() == reflect.Int:
		return kindInt
	case t.Kind() == reflect.Bool:
		return kindBool
	case t.Kind() == reflect.Struct:
		return kindSection
	}
	// A programming error: a new field type needs a case here and in the
	// readers. The tests build the schema, so this cannot reach a user.
	panic(fmt.Sprintf("config: no support for fields of type %s", t))
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// child returns the key called name in a section, or nil.
func (f *field) child(name string) *field {
	for _, c := range f.fields {
		if c.name == name {
			return c
		}
	}
	return nil
}

// all returns every key below f (sections and leaves), depth first.
func (f *field) all() []*field {
	var out []*field
	for _, c := range f.fields {
		out = append(out, c)
		out = append(out, c.all()...)
	}
	return out
}

// leaves returns the keys below f that hold values.
func (f *field) leaves() []*field {
	var out []*field
	for _, c := range f.all() {
		if c.kind != kindSection {
			out = append(out, c)
		}
	}
	return out
}

// viaViper reports whether viper may carry the key's value. Maps (and the
// maps inside agent.checks, agent.logs and agent.plugins.enabled) may not: viper lower-cases their keys and splits
// them at dots.
func (f *field) viaViper() bool {
	return f.kind != kindStringMap && f.kind != kindChecks && f.kind != kindLogFiles && f.kind != kindPlugins
}

// envName is the environment variable for a key.
func envName(key string) string {
	return "UNYO_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flagName is the dashed flag name for a key: agent.max_output ->
// agent-max-output.
func flagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// expected words what a key should hold, for "expected ..., got ...".
func (f *field) expected() string {
	switch f.kind {
	case kindSection:
		return "a mapping"
	case kindString:
		if f.want != "" {
			return "a string " + f.want
		}
		return "a string"
	case kindInt:
		return "an integer"
	case kindBool:
		return "true or false"
	case kindDuration:
		return "a duration such as 10s"
	case kindSize:
		return "a size such as 64KiB"
	case kindStrings:
		return "a list of strings"
	case kindStringMap:
		return "a mapping of names to strings"
	case kindChecks:
		return "a list of checks"
	case kindLogFiles:
		return "a list of log files (path, app, format, start_at)"
	case kindPlugins:
		return "a list of plugins (kind, name, sha256, config)"
	}
	return "something else"
}
