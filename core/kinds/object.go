// Package kinds is the registry of object kinds: everything `unyo apply`,
// `unyo get` and `unyo delete` handle. Each kind is declared once (its
// name, message, owner tier, validation, table columns) and every layer
// reads the declaration: the manifest decoder, the ObjectService on root
// and on clusters, the printer, the CLI and the store.
//
// A kind's name is its message's name ("Check" for unyo.v1.Check), and
// its message is a member of unyov1.Object's oneof; how an object is
// wrapped and unwrapped is read from that oneof, so no kind needs
// hand-written wrappers.
package kinds

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// oneof is the oneof of unyov1.Object that holds the object.
func oneof() protoreflect.OneofDescriptor {
	return (*unyov1.Object)(nil).ProtoReflect().Descriptor().Oneofs().ByName("kind")
}

// member is the oneof field holding messages of type md, or nil.
func member(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	fields := oneof().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && f.Message().FullName() == md.FullName() {
			return f
		}
	}
	return nil
}

// Message returns the message an object holds, or nil if it holds none.
func Message(o *unyov1.Object) proto.Message {
	if o == nil {
		return nil
	}
	r := o.ProtoReflect()
	f := r.WhichOneof(oneof())
	if f == nil {
		return nil
	}
	return r.Get(f).Message().Interface()
}

// Wrap puts a message into an Object; nil if its type is no member of the
// oneof.
func Wrap(m proto.Message) *unyov1.Object {
	f := member(m.ProtoReflect().Descriptor())
	if f == nil {
		return nil
	}
	o := &unyov1.Object{}
	o.ProtoReflect().Set(f, protoreflect.ValueOfMessage(m.ProtoReflect()))
	return o
}

// KindOf returns the object's kind ("Check"), or "" if it holds nothing.
func KindOf(o *unyov1.Object) string {
	if m := Message(o); m != nil {
		return string(m.ProtoReflect().Descriptor().Name())
	}
	return ""
}

// Name returns the object's name, or "" if it has no kind.
func Name(o *unyov1.Object) string { return stringField(Message(o), "name") }

// Cluster returns the cluster the object is meant for, or "" (also for
// kinds that have no cluster).
func Cluster(o *unyov1.Object) string { return stringField(Message(o), "cluster") }

// SetCluster sets the cluster the object is meant for, if its kind has one.
func SetCluster(o *unyov1.Object, cluster string) { setString(o, "cluster", cluster) }

func setString(o *unyov1.Object, name protoreflect.Name, v string) {
	m := Message(o)
	if m == nil {
		return
	}
	if f := m.ProtoReflect().Descriptor().Fields().ByName(name); f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
		m.ProtoReflect().Set(f, protoreflect.ValueOfString(v))
	}
}

// Origins of a cluster's copy of an object (the field origin of kinds
// that have one): who manages it.
const (
	// OriginRoot: applied without a cluster; root keeps the object and
	// brings every cluster up to date with it.
	OriginRoot = "root"
	// OriginDefaults: one of the default rules a cluster starts with.
	OriginDefaults = "defaults"
)

// Origin returns who manages the object ("" for an object applied to its
// cluster, and for kinds without the field).
func Origin(o *unyov1.Object) string { return stringField(Message(o), "origin") }

// SetOrigin sets who manages the object, if its kind has the field.
func SetOrigin(o *unyov1.Object, origin string) { setString(o, "origin", origin) }

// Ref returns the reference naming the object, e.g. for `unyo delete -f`.
func Ref(o *unyov1.Object) *unyov1.ObjectRef {
	return &unyov1.ObjectRef{Kind: KindOf(o), Name: Name(o), Cluster: Cluster(o)}
}

func stringField(m proto.Message, name protoreflect.Name) string {
	if m == nil {
		return ""
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(name)
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return ""
	}
	return r.Get(fd).String()
}

// Member returns the member of Object's oneof holding the named kind, or
// nil if there is none.
func Member(kind string) protoreflect.FieldDescriptor {
	fields := oneof().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && string(f.Message().Name()) == kind {
			return f
		}
	}
	return nil
}

// NewObject returns an empty object of the named kind and its message,
// for decoding what a store or a document holds; ok is false when Object's
// oneof has no member of that name.
func NewObject(kind string) (o *unyov1.Object, m proto.Message, ok bool) {
	f := Member(kind)
	if f == nil {
		return nil, nil, false
	}
	o, m = NewIn(f)
	return o, m, true
}

// NewIn returns an empty object holding the oneof member f, and its
// message; callers decoding many objects of one kind look f up once.
func NewIn(f protoreflect.FieldDescriptor) (*unyov1.Object, proto.Message) {
	o := &unyov1.Object{}
	v := o.ProtoReflect().NewField(f)
	o.ProtoReflect().Set(f, v)
	return o, v.Message().Interface()
}
