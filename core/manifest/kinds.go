package manifest

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// kindInfo is one kind of object `unyo apply` accepts. Everything else about
// a kind (its spec message, which document fields it has) is read from its
// message descriptor, so a new kind is one entry in the kinds table.
type kindInfo struct {
	name    string
	msgType protoreflect.MessageType
	// wrap puts a message of this kind into an Object.
	wrap func(proto.Message) *unyov1.Object
	// unwrap returns the object's message, or nil if the object is of
	// another kind.
	unwrap func(*unyov1.Object) proto.Message
}

// kind builds a table entry from the oneof's typed wrap and getter, so the
// entries stay one line each and type-checked.
func kind[M proto.Message](name string, wrap func(M) *unyov1.Object, get func(*unyov1.Object) M) kindInfo {
	var zero M
	return kindInfo{
		name:    name,
		msgType: zero.ProtoReflect().Type(),
		wrap:    func(m proto.Message) *unyov1.Object { return wrap(m.(M)) },
		unwrap: func(o *unyov1.Object) proto.Message {
			m := get(o)
			if !m.ProtoReflect().IsValid() { // typed nil: another kind
				return nil
			}
			return m
		},
	}
}

// kinds lists every member of Object's oneof, in the order they are listed
// to operators. Read-only; TestKindsTable checks it covers the oneof.
var kinds = []kindInfo{
	kind("Check", func(c *unyov1.Check) *unyov1.Object { return &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}} }, (*unyov1.Object).GetCheck),
	kind("EventRule", func(r *unyov1.EventRule) *unyov1.Object {
		return &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: r}}
	}, (*unyov1.Object).GetEventRule),
	kind("Maintenance", func(m *unyov1.Maintenance) *unyov1.Object {
		return &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: m}}
	}, (*unyov1.Object).GetMaintenance),
}

// documentFields are the fields of a kind's message that a document may
// set, in the order Encode writes them. Other fields (revision, timestamps)
// are filled in by servers. A kind without one of them (a Region has no
// cluster) simply doesn't accept it.
var documentFields = []protoreflect.Name{"name", "cluster", "labels", "spec"}

func lookupKind(name string) (kindInfo, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kindInfo{}, false
}

func objectKind(o *unyov1.Object) (kindInfo, proto.Message, bool) {
	if o == nil {
		return kindInfo{}, nil, false
	}
	for _, k := range kinds {
		if m := k.unwrap(o); m != nil {
			return k, m, true
		}
	}
	return kindInfo{}, nil, false
}

// Kinds returns the names of all known kinds, e.g. ["Check"].
func Kinds() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

func knownKinds() string { return strings.Join(Kinds(), ", ") }

// ParseKind resolves a kind as typed on a command line ("check", "checks",
// "Check") to its canonical name. Documents are stricter: they must spell
// the kind exactly.
func ParseKind(s string) (string, error) {
	for _, k := range kinds {
		if strings.EqualFold(s, k.name) || strings.EqualFold(s, k.name+"s") {
			return k.name, nil
		}
	}
	return "", fmt.Errorf("unknown kind %q (known kinds: %s)", s, knownKinds())
}

// Kind returns the object's kind ("Check"), or "" if it has none.
func Kind(o *unyov1.Object) string {
	k, _, _ := objectKind(o)
	return k.name
}

// Name returns the object's name, or "" if it has no kind.
func Name(o *unyov1.Object) string { return stringField(o, "name") }

// Cluster returns the cluster the object is meant for, or "".
func Cluster(o *unyov1.Object) string { return stringField(o, "cluster") }

// SetCluster sets the cluster the object is meant for, if its kind has one.
func SetCluster(o *unyov1.Object, cluster string) {
	_, m, ok := objectKind(o)
	if !ok {
		return
	}
	if f := m.ProtoReflect().Descriptor().Fields().ByName("cluster"); f != nil {
		m.ProtoReflect().Set(f, protoreflect.ValueOfString(cluster))
	}
}

// Ref returns the reference naming the object, e.g. for `unyo delete -f`.
func Ref(o *unyov1.Object) *unyov1.ObjectRef {
	return &unyov1.ObjectRef{Kind: Kind(o), Name: Name(o), Cluster: Cluster(o)}
}

func stringField(o *unyov1.Object, name protoreflect.Name) string {
	_, m, ok := objectKind(o)
	if !ok {
		return ""
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(name)
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return ""
	}
	return r.Get(fd).String()
}
