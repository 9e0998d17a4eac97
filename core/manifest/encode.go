package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// Encode writes objects as a multi-document YAML stream in the shape Decode
// reads (kind, name, cluster, labels, spec; proto field names; empty fields
// left out), so that `unyo get -o yaml` output can be applied again.
// Server-side fields (revision, timestamps) are not written.
func Encode(w io.Writer, objs []*unyov1.Object) error {
	if len(objs) == 0 {
		return nil // yaml.v3 refuses to close an encoder that wrote nothing
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	for i, o := range objs {
		b, err := MarshalJSON(o)
		if err != nil {
			return fmt.Errorf("object %d: %w", i+1, err)
		}
		n, err := JSONToYAML(b)
		if err != nil {
			return fmt.Errorf("object %d: %w", i+1, err)
		}
		if err := enc.Encode(n); err != nil {
			return err
		}
	}
	return enc.Close()
}

// MarshalJSON returns one object as a compact JSON document of the same
// shape Encode writes, keys in document order.
func MarshalJSON(o *unyov1.Object) ([]byte, error) {
	m := kinds.Message(o)
	if m == nil {
		return nil, fmt.Errorf("object has no kind")
	}
	// protojson knows how to spell every field type; the fields are then
	// picked from its output in document order.
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	if b, err = ReadableEnums(b, m.ProtoReflect().Descriptor()); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(`{"kind":`)
	writeJSONString(&buf, kinds.KindOf(o))
	buf.WriteString(`,"name":`)
	writeJSONString(&buf, kinds.Name(o)) // always, even if empty: a document has a name
	for _, f := range documentFields[1:] {
		if v, ok := fields[string(f)]; ok {
			buf.WriteString(",")
			writeJSONString(&buf, string(f))
			buf.WriteString(":")
			buf.Write(v)
		}
	}
	buf.WriteString("}")
	return buf.Bytes(), nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

// JSONToYAML parses a JSON document into a YAML node in block style,
// keeping the order of keys, for writing JSON-shaped data as YAML (manifests
// here, every -o yaml output in the printer).
func JSONToYAML(b []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("empty JSON document")
	}
	n := doc.Content[0]
	blockStyle(n)
	return n, nil
}

// blockStyle drops the flow style and quoting the JSON syntax implied; the
// encoder then quotes only strings that would otherwise read as another
// type. It does not know YAML 1.1, where yes/no/on/off are booleans, so
// those are quoted here for other tools' sake ("country: NO").
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && isYAML11Bool(n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func isYAML11Bool(s string) bool {
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "on", "off":
		return true
	}
	return false
}
