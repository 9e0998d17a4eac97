package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// fileReader checks a configuration file against the schema, node by node,
// so that every problem can name its key (and line), and collects the values
// that are right.
type fileReader struct {
	path     string
	root     *field
	values   map[string]setting
	problems []Problem
}

// readFile parses and checks one configuration file. It returns the values
// the file sets (by key) and every problem found; a key with a problem is
// left out of the values. The values are nil if the file could not be read
// as settings at all (bad YAML, a manifest, or not a mapping).
func readFile(path string, data []byte, root *field) (map[string]setting, []Problem) {
	r := &fileReader{path: path, root: root, values: map[string]setting{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // empty, or only comments: all defaults
			return r.values, nil
		}
		return nil, []Problem{r.syntaxProblem(err, data)}
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) > 0 {
		top = top.Content[0]
	}
	top = resolve(top)
	if kind := lookup(top, "kind"); kind != nil {
		// An easy mistake: configs/resources/checks.yaml passed as --config.
		r.add(kind.Line, "", "this is a manifest of objects for unyo apply (it has kind:), not a configuration file")
		return nil, r.problems
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		// A second document would be silently ignored by most readers.
		r.add(next.Line, "", "only one YAML document is allowed (remove the second ---)")
	case !errors.Is(err, io.EOF):
		r.problems = append(r.problems, r.syntaxProblem(err, data))
	}
	if !isNull(top) && top.Kind != yaml.MappingNode {
		r.add(top.Line, "", "expected a mapping of settings (key: value) at the top level, got "+describe(top))
		return nil, r.problems
	}
	r.section(top, root)
	return r.values, r.problems
}

// syntaxProblem turns a yaml.v3 error ("yaml: line 12: ...") into a problem
// with the line, adding a hint for the commonest cause, tab indentation.
func (r *fileReader) syntaxProblem(err error, data []byte) Problem {
	rest, found := strings.CutPrefix(err.Error(), "yaml: line ")
	number, text, _ := strings.Cut(rest, ": ")
	line, atoiErr := strconv.Atoi(number)
	if !found || atoiErr != nil {
		return Problem{File: r.path, Msg: oneLine(err.Error())}
	}
	msg := "yaml: " + oneLine(text)
	lines := strings.Split(string(data), "\n")
	for _, l := range lines[max(0, line-2):min(len(lines), line+1)] { // yaml.v3 may be a line off
		if strings.HasPrefix(strings.TrimLeft(l, " "), "\t") && !strings.Contains(msg, "tab") {
			msg += " (tabs cannot be used for indentation in YAML; use spaces)"
			break
		}
	}
	return Problem{File: r.path, Line: line, Msg: msg}
}

func (r *fileReader) add(line int, key, msg string) {
	r.problems = append(r.problems, Problem{File: r.path, Line: line, Key: key, Msg: msg})
}

func (r *fileReader) set(f *field, n *yaml.Node, value any) {
	r.values[f.key] = setting{value: value, from: origin{file: r.path, line: n.Line}}
}

// section checks a mapping against the keys of a section.
func (r *fileReader) section(n *yaml.Node, sec *field) {
	firstLine := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := joinKey(sec.key, k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			r.add(k.Line, sec.key, "keys must be plain names, got "+describe(k))
			continue
		case k.Value == "<<":
			r.add(k.Line, key, "YAML merge keys are not supported; write the settings out")
			continue
		}
		if first, dup := firstLine[k.Value]; dup {
			r.add(k.Line, key, fmt.Sprintf("duplicate key (first set on line %d)", first))
			continue
		}
		firstLine[k.Value] = k.Line
		f := sec.child(k.Value)
		if f == nil {
			r.add(k.Line, key, unknownKey(r.root, sec, k.Value))
			continue
		}
		r.value(v, f)
	}
}

// value checks the value of one key and records it if it is right. An
// empty value ("key:" with nothing after it) leaves the default in place,
// so a commented-out block under a section header is harmless.
func (r *fileReader) value(n *yaml.Node, f *field) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	wrongType := func() { r.add(n.Line, f.key, fmt.Sprintf("expected %s, got %s", f.expected(), describe(n))) }
	switch f.kind {
	case kindSection:
		if n.Kind != yaml.MappingNode {
			wrongType()
			return
		}
		r.section(n, f)

	case kindString:
		// Numbers and booleans are taken as written ("0123" stays 0123), so
		// an unquoted token or name is not mangled.
		if n.Kind != yaml.ScalarNode {
			wrongType()
			return
		}
		r.set(f, n, n.Value)

	case kindInt:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			wrongType()
			return
		}
		v, err := strconv.ParseInt(n.Value, 0, strconv.IntSize)
		if err != nil {
			r.add(n.Line, f.key, fmt.Sprintf("invalid integer %s (out of range)", n.Value))
			return
		}
		r.set(f, n, int(v))

	case kindBool, kindDuration, kindSize:
		// A quoted "true" is a string: booleans must be written as such.
		if n.Kind != yaml.ScalarNode || (f.kind == kindBool && n.ShortTag() != "!!bool") {
			wrongType()
			return
		}
		v, err := parseText(f, n.Value)
		if err != nil {
			r.add(n.Line, f.key, err.Error())
			return
		}
		r.set(f, n, v)

	case kindStrings, kindChecks, kindLogFiles, kindPlugins:
		if n.Kind != yaml.SequenceNode {
			wrongType()
			return
		}
		switch f.kind {
		case kindStrings:
			readList(r, n, f, r.str)
		case kindChecks:
			readList(r, n, f, r.check)
		case kindLogFiles:
			readList(r, n, f, r.logFile)
		case kindPlugins:
			readList(r, n, f, r.plugin)
		}

	case kindStringMap:
		if n.Kind != yaml.MappingNode {
			wrongType()
			return
		}
		m := map[string]string{}
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
			key := joinKey(f.key, k.Value)
			switch _, dup := m[k.Value]; {
			case k.Kind != yaml.ScalarNode || k.Value == "":
				r.add(k.Line, f.key, "names must be non-empty strings, got "+describe(k))
			case dup:
				r.add(k.Line, key, "duplicate name")
			case v.Kind != yaml.ScalarNode || isNull(v):
				r.add(v.Line, key, "expected a string, got "+describe(v))
			default:
				m[k.Value] = v.Value
				continue
			}
			ok = false
		}
		if ok {
			r.set(f, n, m)
		}
	}
}

// readList reads a sequence item by item and records the list only when
// every item is right; a wrong item has reported itself.
func readList[T any](r *fileReader, n *yaml.Node, f *field, read func(item *yaml.Node, key string) (T, bool)) {
	list := []T{}
	ok := true
	for i, item := range n.Content {
		v, good := read(resolve(item), fmt.Sprintf("%s[%d]", f.key, i))
		list = append(list, v)
		ok = ok && good
	}
	if ok {
		r.set(f, n, list)
	}
}

// str reads one item of a list of strings.
func (r *fileReader) str(item *yaml.Node, key string) (string, bool) {
	if item.Kind != yaml.ScalarNode || isNull(item) {
		r.add(item.Line, key, "expected a string, got "+describe(item))
		return "", false
	}
	return item.Value, true
}

// plugin reads one item of plugins.enabled: kind, name and sha256 strings
// and a free-form config mapping. Allowed values are checked by Validate.
func (r *fileReader) plugin(n *yaml.Node, key string) (Plugin, bool) {
	var p Plugin
	if n.Kind != yaml.MappingNode {
		r.add(n.Line, key, "expected a mapping with a kind, name and sha256 (and config), got "+describe(n))
		return p, false
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		var dst *string
		switch k.Value {
		case "kind":
			dst = &p.Kind
		case "name":
			dst = &p.Name
		case "sha256":
			dst = &p.SHA256
		case "config":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				r.add(v.Line, key+".config", "expected a mapping (passed to the plugin as JSON), got "+describe(v))
				ok = false
				continue
			}
			var m map[string]any
			if err := v.Decode(&m); err != nil {
				r.add(v.Line, key+".config", oneLine(err.Error()))
				ok = false
				continue
			}
			if _, err := json.Marshal(m); err != nil {
				r.add(v.Line, key+".config", "cannot be passed as JSON: "+oneLine(err.Error()))
				ok = false
				continue
			}
			p.Config = m
			continue
		default:
			r.add(k.Line, key+"."+k.Value, "unknown key (expected kind, name, sha256 or config)")
			ok = false
			continue
		}
		val, good := r.str(v, key+"."+k.Value)
		ok = ok && good
		*dst = val
	}
	return p, ok
}

// logFile reads one item of agent.logs: a mapping of known string keys.
// Allowed values are checked by Validate, which names the key too.
func (r *fileReader) logFile(n *yaml.Node, key string) (LogFile, bool) {
	var lf LogFile
	if n.Kind != yaml.MappingNode {
		r.add(n.Line, key, "expected a mapping with a path (and app, format, start_at), got "+describe(n))
		return lf, false
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		var dst *string
		switch k.Value {
		case "path":
			dst = &lf.Path
		case "app":
			dst = &lf.App
		case "format":
			dst = &lf.Format
		case "start_at":
			dst = &lf.StartAt
		default:
			r.add(k.Line, key+"."+k.Value, "unknown key (expected path, app, format or start_at)")
			ok = false
			continue
		}
		val, good := r.str(v, key+"."+k.Value)
		ok = ok && good
		*dst = val
	}
	return lf, ok
}

// check checks one item of agent.checks: only that it is a mapping with a
// non-empty string name. The rest (labels, spec) is decoded and checked by
// the code `unyo apply` uses, so that the two cannot drift apart.
func (r *fileReader) check(n *yaml.Node, key string) (map[string]any, bool) {
	if n.Kind != yaml.MappingNode {
		r.add(n.Line, key, "expected a mapping with a name and a spec, got "+describe(n))
		return nil, false
	}
	name := lookup(n, "name")
	switch {
	case name == nil:
		r.add(n.Line, key+".name", "required (every check needs a name)")
		return nil, false
	case name.Kind != yaml.ScalarNode || name.ShortTag() != "!!str" || name.Value == "":
		r.add(name.Line, key+".name", "expected a non-empty string, got "+describe(name))
		return nil, false
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		r.add(n.Line, key, oneLine(err.Error()))
		return nil, false
	}
	return m, true
}

// lookup returns the value of key in a mapping node, or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// resolve follows YAML aliases (*name) to the anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "got ...". String values are not
// quoted back: they may be secrets.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		case "!!str":
			if n.Value == "" {
				return "an empty string"
			}
		}
		return "a string"
	}
	return "something else"
}

// oneLine keeps a multi-line error on one line, one problem per line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
