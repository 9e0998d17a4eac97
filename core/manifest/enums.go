package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// ReadableEnums rewrites b, the protojson form (proto field names) of a
// message of type md, so that every enum value is spelled as operators
// read and type it ("critical", not "LEVEL_CRITICAL"; unyov1's names.go is
// the table). Keys keep their order and every other value its bytes, so
// the output differs from protojson's in the enum values only. Decode reads
// both spellings back.
func ReadableEnums(b []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	if !hasNamedEnum(md, map[protoreflect.FullName]bool{}) {
		return b, nil // most messages: nothing to do, no parse
	}
	var out bytes.Buffer
	if err := readableMessage(&out, b, md); err != nil {
		return nil, fmt.Errorf("readable enums of %s: %w", md.FullName(), err)
	}
	return out.Bytes(), nil
}

// hasNamedEnum tells whether a message of type md can hold an enum value
// that names.go spells, at any depth.
func hasNamedEnum(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] || wellKnown(md) {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		switch fd.Kind() {
		case protoreflect.EnumKind:
			if _, ok := unyov1.EnumName(fd.Enum(), 0); ok {
				return true
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			if hasNamedEnum(fd.Message(), seen) {
				return true
			}
		}
	}
	return false
}

// wellKnown: google.protobuf types have their own JSON forms and no enums
// of ours.
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

func readableMessage(out *bytes.Buffer, b []byte, md protoreflect.MessageDescriptor) error {
	if wellKnown(md) {
		out.Write(b)
		return nil
	}
	return eachMember(out, b, func(key string, v json.RawMessage) error {
		fd := md.Fields().ByName(protoreflect.Name(key))
		if fd == nil {
			fd = md.Fields().ByJSONName(key)
		}
		if fd == nil {
			out.Write(v)
			return nil
		}
		return readableField(out, v, fd)
	})
}

func readableField(out *bytes.Buffer, v json.RawMessage, fd protoreflect.FieldDescriptor) error {
	switch {
	case fd.IsMap():
		return eachMember(out, v, func(_ string, v json.RawMessage) error {
			return readableValue(out, v, fd.MapValue())
		})
	case fd.IsList():
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return err
		}
		out.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := readableValue(out, item, fd); err != nil {
				return err
			}
		}
		out.WriteByte(']')
		return nil
	}
	return readableValue(out, v, fd)
}

func readableValue(out *bytes.Buffer, v json.RawMessage, fd protoreflect.FieldDescriptor) error {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		var s string
		if json.Unmarshal(v, &s) != nil {
			break // a number: protojson's spelling of a value with no name
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(s))
		if ev == nil {
			break
		}
		if name, ok := unyov1.EnumName(fd.Enum(), ev.Number()); ok {
			b, err := json.Marshal(name)
			if err != nil {
				return err
			}
			out.Write(b)
			return nil
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return readableMessage(out, v, fd.Message())
		}
	}
	out.Write(v)
	return nil
}

// eachMember copies the JSON object b to out, member by member in order,
// letting value write each member's value.
func eachMember(out *bytes.Buffer, b []byte, value func(key string, v json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("expected a JSON object, got %.40q", b)
	}
	out.WriteByte('{')
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if i > 0 {
			out.WriteByte(',')
		}
		writeJSONString(out, key)
		out.WriteByte(':')
		if err := value(key, v); err != nil {
			return err
		}
	}
	out.WriteByte('}')
	return nil
}
