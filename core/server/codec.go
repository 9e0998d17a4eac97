package server

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is connect's JSON codec without DiscardUnknown: a misspelt
// field ("comand") is refused and named, as the CLI refuses it in a
// manifest, instead of being dropped silently. The binary proto codec keeps
// skipping unknown fields, so older and newer agents and CLIs still talk.
type strictJSON struct{ name string }

// StrictJSON registers strictJSON under both names connect serves JSON as.
func StrictJSON() connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCodec(strictJSON{name: "json"}),
		connect.WithCodec(strictJSON{name: "json; charset=utf-8"}),
	)
}

func (c strictJSON) Name() string { return c.name }

func (strictJSON) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", v)
	}
	return protojson.Marshal(m)
}

func (strictJSON) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", v)
	}
	if len(b) == 0 {
		return errors.New("empty body: send a JSON object, {} at least")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(b, m); err != nil {
		return fmt.Errorf("request body is not a valid %s (field names as in unyo.proto, in lowerCamelCase or snake_case): %w",
			m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}
