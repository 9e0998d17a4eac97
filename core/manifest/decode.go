package manifest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// docDecoder checks one document against its kind's descriptor and builds
// the equivalent protojson input, collecting every problem on the way.
type docDecoder struct {
	source string
	doc    int
	offset int    // added to node lines: documents are parsed one by one
	label  string // `Check "disk"`, once known
	errs   ErrorList
	budget budget
	kinds  *kinds.Registry
}

func (d *docDecoder) errorf(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil && n.Line > 0 {
		line = n.Line + d.offset
	}
	d.errs = append(d.errs, &Error{
		Source:   d.source,
		Document: d.doc,
		Line:     line,
		Object:   d.label,
		Path:     path,
		Msg:      fmt.Sprintf(format, args...),
	})
}

// object decodes a document. implied is the kind assumed when the document
// names none; "" makes kind required. It returns nil if anything was wrong.
func (d *docDecoder) object(n *yaml.Node, implied string) *unyov1.Object {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "", "expected a mapping with kind, name and spec, got %s", describe(n))
		return nil
	}
	before := len(d.errs)
	pairs := d.pairs(n, "")
	byKey := map[string]*yaml.Node{}
	for _, p := range pairs {
		byKey[p.key.Value] = p.value
	}

	// Name the object first, so that every later error can say which
	// object it is about.
	kindNode, name := byKey["kind"], peekString(byKey["name"])
	kindName := implied
	if kindNode != nil {
		kindName = peekString(kindNode)
	}
	d.label = strings.TrimSpace(kindName + " " + quoteIf(name))

	k, kindOK := kinds.Kind{}, false
	switch {
	case kindNode == nil && implied == "":
		d.errorf(n, "kind", "required (known kinds: %s)", d.kinds.Known())
	case kindNode == nil:
		k, kindOK = d.kinds.Lookup(implied)
	default:
		if s, ok := d.scalarString(kindNode, "kind"); ok {
			switch k, kindOK = d.kinds.Lookup(s); {
			case implied != "" && s != implied:
				kindOK = false
				d.errorf(kindNode, "kind", "expected %s here, got %q", implied, s)
			case !kindOK:
				d.errorf(kindNode, "kind", "unknown kind %q%s (known kinds: %s)", s, kindHint(s, d.kinds.Names()), d.kinds.Known())
			}
		}
	}

	known := topLevelFields(k, kindOK)
	out := map[string]any{}
	for _, p := range pairs {
		key := p.key.Value
		switch {
		case key == "kind":
		case key == "apiVersion":
			if s, ok := d.scalarString(p.value, key); ok && s != APIVersion {
				d.errorf(p.value, key, "unsupported apiVersion %q (expected %s, or none)", s, APIVersion)
			}
		case !slices.Contains(known, key):
			d.unknownField(p.key, key, known)
		case kindOK:
			fd := k.Type().Descriptor().Fields().ByName(protoreflect.Name(key))
			if v, ok := d.field(p.value, fd, key); ok {
				out[key] = v
			}
		}
	}
	switch nameNode := deref(byKey["name"]); {
	case nameNode == nil || isNull(nameNode):
		d.errorf(n, "name", "required")
	case nameNode.Kind == yaml.ScalarNode && nameNode.Value == "" && nameNode.ShortTag() == "!!str":
		d.errorf(nameNode, "name", "must not be empty")
	}
	if len(d.errs) > before || !kindOK {
		return nil
	}

	b, err := json.Marshal(out)
	if err == nil {
		o, m := k.New()
		if err = protojson.Unmarshal(b, m); err == nil {
			return o
		}
		err = fmt.Errorf("%s", protoError(err))
	}
	// Only what the walk above does not check (base64 bytes, timestamps)
	// gets here.
	d.errorf(n, "", "%v", err)
	return nil
}

// topLevelFields lists the keys a document of kind k may have.
func topLevelFields(k kinds.Kind, ok bool) []string {
	fields := []string{"apiVersion", "kind"}
	for _, f := range documentFields {
		if !ok || k.Type().Descriptor().Fields().ByName(f) != nil {
			fields = append(fields, string(f))
		}
	}
	return fields
}

// field converts a field's YAML value into its protojson form. ok is false
// when the value is null (the field stays unset) or wrong (reported).
func (d *docDecoder) field(n *yaml.Node, fd protoreflect.FieldDescriptor, path string) (v any, ok bool) {
	n = deref(n)
	if isNull(n) || !d.spend(n) {
		return nil, false
	}
	switch {
	case fd.IsList():
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list of %s, got %s", typeName(fd, true), describe(n))
			return nil, false
		}
		list, ok := make([]any, 0, len(n.Content)), true
		for i, e := range n.Content {
			v, eok := d.value(e, fd, fmt.Sprintf("%s[%d]", path, i))
			list, ok = append(list, v), ok && eok
		}
		return list, ok
	case fd.IsMap():
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "expected a mapping of %s to %s, got %s", typeName(fd.MapKey(), true), typeName(fd.MapValue(), true), describe(n))
			return nil, false
		}
		m, ok := map[string]any{}, true
		for _, p := range d.pairs(n, path) {
			kp := keyPath(path, p.key.Value)
			key, kok := d.value(p.key, fd.MapKey(), kp)
			v, vok := d.value(p.value, fd.MapValue(), kp)
			if kok && vok {
				m[fmt.Sprint(key)] = v // protojson wants every map key as a string
			}
			ok = ok && kok && vok
		}
		return m, ok
	}
	return d.value(n, fd, path)
}

// value converts one singular value (a field, list element, map key or map
// value) of fd's type.
func (d *docDecoder) value(n *yaml.Node, fd protoreflect.FieldDescriptor, path string) (any, bool) {
	n = deref(n)
	if !d.spend(n) {
		return nil, false
	}
	tag := n.ShortTag()
	scalar := n.Kind == yaml.ScalarNode
	switch fd.Kind() {
	case protoreflect.StringKind:
		// A date is text the YAML resolver happened to recognize.
		if scalar && (tag == "!!str" || tag == "!!timestamp") {
			return n.Value, true
		}
		hint := ""
		if scalar && (tag == "!!int" || tag == "!!float" || tag == "!!bool") {
			hint = fmt.Sprintf(" (quote it: %q)", n.Value)
		}
		d.errorf(n, path, "expected a string, got %s%s", describe(n), hint)
	case protoreflect.BoolKind:
		var b bool
		if scalar && tag == "!!bool" && n.Decode(&b) == nil {
			return b, true
		}
		d.errorf(n, path, "expected true or false, got %s", describe(n))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		bits := 64
		if fd.Kind() == protoreflect.Int32Kind || fd.Kind() == protoreflect.Sint32Kind || fd.Kind() == protoreflect.Sfixed32Kind {
			bits = 32
		}
		if i, ok := scalarInt(n); ok {
			if bits == 64 || (i >= math.MinInt32 && i <= math.MaxInt32) {
				return json.Number(strconv.FormatInt(i, 10)), true
			}
			d.errorf(n, path, "expected a 32-bit integer, got %s (out of range)", n.Value)
			return nil, false
		}
		d.errorf(n, path, "expected an integer, got %s", describe(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		var u uint64
		ok := scalar && tag == "!!int" && n.Decode(&u) == nil
		if !ok && scalar && tag == "!!str" {
			var err error
			u, err = strconv.ParseUint(n.Value, 10, 64)
			ok = err == nil
		}
		if ok && (u <= math.MaxUint32 || fd.Kind() == protoreflect.Uint64Kind || fd.Kind() == protoreflect.Fixed64Kind) {
			return json.Number(strconv.FormatUint(u, 10)), true
		}
		d.errorf(n, path, "expected a non-negative integer, got %s", describe(n))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		var f float64
		ok := scalar && (tag == "!!float" || tag == "!!int") && n.Decode(&f) == nil
		if !ok && scalar && tag == "!!str" {
			var err error
			f, err = strconv.ParseFloat(n.Value, 64)
			ok = err == nil
		}
		if ok {
			return jsonFloat(f), true
		}
		d.errorf(n, path, "expected a number, got %s", describe(n))
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		// The names operators read (critical) and, for documents written
		// before them, the generated ones (LEVEL_CRITICAL).
		if v, named, err := unyov1.ParseEnumName(fd.Enum(), n.Value); scalar && tag == "!!str" && named {
			if err != nil {
				d.errorf(n, path, "%v", err)
				return nil, false
			}
			return string(values.ByNumber(v).Name()), true
		}
		if scalar && tag == "!!str" && values.ByName(protoreflect.Name(n.Value)) != nil {
			return n.Value, true
		}
		names := make([]string, values.Len())
		for i := range names {
			names[i] = string(values.Get(i).Name())
		}
		d.errorf(n, path, "expected one of %s; got %s", strings.Join(names, ", "), describe(n))
	case protoreflect.BytesKind:
		// protojson checks the base64 itself.
		if scalar && (tag == "!!str" || tag == "!!binary") {
			return n.Value, true
		}
		d.errorf(n, path, "expected base64 text, got %s", describe(n))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return d.message(n, fd.Message(), path)
	}
	return nil, false
}

// message converts a mapping into a message of type md, reporting unknown
// fields. Well-known types take their JSON form instead.
func (d *docDecoder) message(n *yaml.Node, md protoreflect.MessageDescriptor, path string) (any, bool) {
	switch name := md.FullName(); name {
	case "google.protobuf.Duration", "google.protobuf.Timestamp", "google.protobuf.FieldMask":
		if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!str" || n.ShortTag() == "!!timestamp") {
			return n.Value, true
		}
		d.errorf(n, path, "expected a string, got %s", describe(n))
		return nil, false
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue",
		"google.protobuf.Int64Value", "google.protobuf.UInt64Value",
		"google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return d.value(n, md.Fields().ByName("value"), path)
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return d.anyValue(n, path)
	case "google.protobuf.Any":
		d.errorf(n, path, "%s is not supported in manifests", name)
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return nil, false
	}
	out, ok := map[string]any{}, true
	oneofs := map[protoreflect.Name]string{} // oneof -> the field that set it
	for _, p := range d.pairs(n, path) {
		fp := keyPath(path, p.key.Value)
		fd := md.Fields().ByName(protoreflect.Name(p.key.Value))
		if fd == nil {
			d.unknownField(p.key, fp, fieldNames(md))
			ok = false
			continue
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && !isNull(deref(p.value)) {
			if other, set := oneofs[od.Name()]; set {
				d.errorf(p.key, fp, "cannot be set together with %s", other)
				ok = false
				continue
			}
			oneofs[od.Name()] = p.key.Value
		}
		if v, fok := d.field(p.value, fd, fp); fok {
			out[p.key.Value] = v
		} else if !isNull(deref(p.value)) {
			ok = false
		}
	}
	return out, ok
}

// anyValue converts free-form YAML (google.protobuf.Struct and friends).
func (d *docDecoder) anyValue(n *yaml.Node, path string) (any, bool) {
	n = deref(n)
	if !d.spend(n) {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m, ok := map[string]any{}, true
		for _, p := range d.pairs(n, path) {
			v, vok := d.anyValue(p.value, keyPath(path, p.key.Value))
			m[p.key.Value], ok = v, ok && vok
		}
		return m, ok
	case yaml.SequenceNode:
		l, ok := make([]any, 0, len(n.Content)), true
		for i, e := range n.Content {
			v, eok := d.anyValue(e, fmt.Sprintf("%s[%d]", path, i))
			l, ok = append(l, v), ok && eok
		}
		return l, ok
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err == nil
	case "!!int", "!!float":
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return jsonFloat(f), true
		}
	case "!!str", "!!timestamp":
		return n.Value, true
	}
	d.errorf(n, path, "cannot be represented in JSON: %s", describe(n))
	return nil, false
}

type pair struct{ key, value *yaml.Node }

// pairs returns a mapping's entries, reporting non-scalar and duplicate
// keys (yaml.v3 only does that when decoding into Go maps) and expanding
// merge keys ("<<: *defaults"), whose entries explicit keys override.
func (d *docDecoder) pairs(n *yaml.Node, path string) []pair {
	var out, merged []pair
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.spend(k) {
			return nil
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, path)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be scalars, got %s", describe(k))
			continue
		}
		if f, dup := first[k.Value]; dup {
			line := ""
			if f.Line > 0 {
				line = fmt.Sprintf(" (first at line %d)", f.Line+d.offset)
			}
			d.errorf(k, keyPath(path, k.Value), "duplicate key%s", line)
			continue
		}
		first[k.Value] = k
		out = append(out, pair{k, v})
	}
	for _, p := range merged {
		if _, set := first[p.key.Value]; !set {
			first[p.key.Value] = p.key
			out = append(out, p)
		}
	}
	return out
}

func (d *docDecoder) mergePairs(v *yaml.Node, path string) []pair {
	v = deref(v)
	sources := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		sources = v.Content
	}
	var out []pair
	for _, s := range sources {
		if s = deref(s); s.Kind != yaml.MappingNode {
			d.errorf(s, keyPath(path, "<<"), "can only merge mappings, got %s", describe(s))
			continue
		}
		out = append(out, d.pairs(s, path)...)
	}
	return out
}

func (d *docDecoder) scalarString(n *yaml.Node, path string) (string, bool) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return n.Value, true
	}
	d.errorf(n, path, "expected a string, got %s", describe(n))
	return "", false
}

func (d *docDecoder) unknownField(key *yaml.Node, path string, known []string) {
	hint := ""
	if s := suggest(key.Value, known); s != "" {
		hint = fmt.Sprintf(", did you mean %s?", s)
	} else if key.Value == "metadata" {
		hint = " (name, cluster and labels go at the top level)"
	}
	d.errorf(key, path, "unknown field%s (known fields: %s)", hint, strings.Join(known, ", "))
}

// deref follows aliases, so "*defaults" is checked as what it stands for.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// peekString returns a plain string value without reporting anything.
func peekString(n *yaml.Node) string {
	if n = deref(n); n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return n.Value
	}
	return ""
}

func quoteIf(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

// describe says what a node is, for "expected X, got Y".
func describe(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.DocumentNode:
		return "a document"
	}
	switch tag := n.ShortTag(); tag {
	case "!!str":
		return strconv.Quote(n.Value)
	case "!!null":
		return "null"
	case "!!int":
		return "the integer " + n.Value
	case "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	case "!!timestamp":
		return "the date " + n.Value
	default:
		return fmt.Sprintf("%s %q", tag, n.Value)
	}
}

// typeName names a field's type for operators.
func typeName(fd protoreflect.FieldDescriptor, plural bool) string {
	var s string
	switch fd.Kind() {
	case protoreflect.StringKind:
		s = "string"
	case protoreflect.BoolKind:
		s = "boolean"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		s = "number"
	case protoreflect.EnumKind:
		s = "name"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		s = "mapping"
	case protoreflect.BytesKind:
		s = "base64 string"
	default:
		s = "integer"
	}
	if plural {
		return s + "s"
	}
	return s
}

func fieldNames(md protoreflect.MessageDescriptor) []string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		names[i] = string(md.Fields().Get(i).Name())
	}
	return names
}

// scalarInt reads a signed integer from an integer scalar or, as protojson
// does, from a decimal string.
func scalarInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	switch n.ShortTag() {
	case "!!int":
		var i int64
		return i, n.Decode(&i) == nil
	case "!!str":
		i, err := strconv.ParseInt(n.Value, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// jsonFloat spells a float the way protojson reads it.
func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// keyPath appends a key to a field path, bracketing keys like
// "app.kubernetes.io/name" that would not read as one path element.
func keyPath(path, key string) string {
	if !identifier.MatchString(key) {
		key = "[" + strconv.Quote(key) + "]"
		if path == "" {
			return key
		}
		return path + key
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// kindHint suggests the kind a near miss ("check", "Chek") meant.
func kindHint(s string, known []string) string {
	if k := suggest(s, known); k != "" {
		return ", did you mean " + k + "?"
	}
	return ""
}

// suggest returns the candidate that s most likely misspells, or "": equal
// but for case and underscores (nodeSelector for node_selector), or within
// two edits.
func suggest(s string, candidates []string) string {
	norm := func(x string) string { return strings.ToLower(strings.ReplaceAll(x, "_", "")) }
	best, bestDist := "", 3
	for _, c := range candidates {
		if norm(c) == norm(s) {
			return c
		}
		if dist := editDistance(s, c); dist < bestDist && dist < len(c)/2 {
			best, bestDist = c, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
