package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

func newExplainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "explain KIND[.FIELD...]",
		Short: "Describe a kind or one of its fields, from the schema: type and documentation",
		Long: `Explain prints what a document of a kind holds, as kubectl explain does:
for the kind or the field named by a dotted path (check.spec.interval), its
type, its documentation from the schema's comments, and its fields. It
needs no server.`,
		Example: "  unyo explain check\n  unyo explain check.spec\n  unyo explain rule.spec.match",
		Args:    cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			var out []string
			for _, k := range builtin.Kinds().Kinds() {
				out = append(out, strings.ToLower(k.Name))
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			docs, err := schemaComments(api.Schema)
			if err != nil {
				return err
			}
			return explain(cmd.OutOrStdout(), args[0], docs)
		},
	}
}

// explain prints the kind or field path names.
func explain(w io.Writer, path string, docs map[string]string) error {
	parts := strings.Split(path, ".")
	k, err := builtin.Kinds().Parse(parts[0])
	if err != nil {
		return err
	}
	md := k.Type().Descriptor()
	var fd protoreflect.FieldDescriptor
	for i, p := range parts[1:] {
		if md == nil {
			return fmt.Errorf("%s: %s is a %s and has no fields", path, strings.Join(parts[:i+1], "."), typeOf(fd))
		}
		fd = md.Fields().ByName(protoreflect.Name(p))
		if fd == nil {
			return fmt.Errorf("%s: %s has no field %q (it has: %s)", path, md.Name(), p, fieldList(md))
		}
		md = fd.Message()
		if fd.IsMap() {
			md = nil // a map's entries are documented by the map field
		}
	}
	fmt.Fprintf(w, "KIND:     %s\n", k.Name)
	if fd != nil {
		fmt.Fprintf(w, "FIELD:    %s <%s>\n", strings.Join(parts[1:], "."), typeOf(fd))
	}
	doc := ""
	if fd != nil {
		doc = docs[string(fd.ContainingMessage().Name())+"."+string(fd.Name())]
		if doc == "" && md != nil {
			doc = docs[string(md.Name())]
		}
	} else {
		doc = docs[string(md.Name())]
		if k.Help != "" {
			doc = strings.TrimSpace(k.Help + "\n" + doc)
		}
	}
	fmt.Fprintf(w, "\nDESCRIPTION:\n%s\n", indent(orNone(doc), "  "))
	if md != nil {
		fmt.Fprintf(w, "\nFIELDS:\n")
		fs := md.Fields()
		for i := range fs.Len() {
			f := fs.Get(i)
			fmt.Fprintf(w, "  %s\t<%s>\n", f.Name(), typeOf(f))
			if d := docs[string(md.Name())+"."+string(f.Name())]; d != "" {
				fmt.Fprintf(w, "%s\n", indent(d, "    "))
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(not documented)"
	}
	return s
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}

func fieldList(md protoreflect.MessageDescriptor) string {
	var names []string
	for i := range md.Fields().Len() {
		names = append(names, string(md.Fields().Get(i).Name()))
	}
	return strings.Join(names, ", ")
}

// typeOf spells a field's type as a document holds it: string, int32,
// []string, map[string]string, Object names for messages, enums' names.
func typeOf(fd protoreflect.FieldDescriptor) string {
	if fd == nil {
		return ""
	}
	if fd.IsMap() {
		return "map[" + scalarType(fd.MapKey()) + "]" + scalarType(fd.MapValue())
	}
	t := scalarType(fd)
	if fd.IsList() {
		return "[]" + t
	}
	return t
}

func scalarType(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp":
			return "time (RFC 3339)"
		case "google.protobuf.Duration":
			return "duration"
		case "google.protobuf.Struct":
			return "object"
		}
		return string(fd.Message().Name())
	case protoreflect.EnumKind:
		return "enum " + string(fd.Enum().Name())
	}
	return fd.Kind().String()
}

var (
	messageLine = regexp.MustCompile(`^\s*(message|enum)\s+(\w+)\s*\{`)
	fieldLine   = regexp.MustCompile(`^\s*(?:repeated\s+|optional\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+`)
)

// schemaComments reads the comments of the proto sources: the lines of //
// comments right above a message ("Check") or a field ("CheckSpec.interval").
func schemaComments(fsys fs.FS) (map[string]string, error) {
	docs := map[string]string{}
	files, err := fs.Glob(fsys, "unyo/v1/*.proto")
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var stack []string
		var comment []string
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(line, "//"):
				comment = append(comment, strings.TrimSpace(strings.TrimPrefix(line, "//")))
				continue
			case messageLine.MatchString(line):
				m := messageLine.FindStringSubmatch(line)
				docs[m[2]] = strings.Join(comment, "\n")
				stack = append(stack, m[2])
			case strings.HasPrefix(line, "}") && len(stack) > 0:
				stack = stack[:len(stack)-1]
			case len(stack) > 0 && fieldLine.MatchString(line):
				f := fieldLine.FindStringSubmatch(line)[1]
				doc := comment
				// A trailing comment on the field's line documents it too.
				if _, tail, ok := strings.Cut(line, "//"); ok {
					doc = append(doc, strings.TrimSpace(tail))
				}
				docs[stack[len(stack)-1]+"."+f] = strings.Join(doc, "\n")
			}
			comment = nil
		}
	}
	return docs, nil
}
