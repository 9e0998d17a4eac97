package unyov1

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// The names operators read and type for the API's enums, both ways, in one
// table (hand-written beside the generated code). The printer, the CLI's
// parsers, rule compilation, templates, webhook bodies and messages all
// spell a level or a state through here, never by trimming the generated
// name.

var (
	levelNames = enumNames[Level]{what: "event level", values: []enumName[Level]{
		{Level_LEVEL_SUCCESS, "success"}, {Level_LEVEL_WARNING, "warning"}, {Level_LEVEL_CRITICAL, "critical"},
	}}
	checkStatusNames = enumNames[CheckStatus]{what: "check status", values: []enumName[CheckStatus]{
		{CheckStatus_CHECK_STATUS_OK, "ok"}, {CheckStatus_CHECK_STATUS_WARNING, "warning"},
		{CheckStatus_CHECK_STATUS_CRITICAL, "critical"}, {CheckStatus_CHECK_STATUS_UNKNOWN, "unknown"},
	}}
	alertLevelNames = enumNames[AlertLevel]{what: "alert level", values: []enumName[AlertLevel]{
		{AlertLevel_ALERT_LEVEL_FATAL, "fatal"}, {AlertLevel_ALERT_LEVEL_CRITICAL, "critical"}, {AlertLevel_ALERT_LEVEL_WARNING, "warning"},
	}}
	alertStateNames = enumNames[AlertState]{what: "alert state", values: []enumName[AlertState]{
		{AlertState_ALERT_STATE_OPEN, "open"}, {AlertState_ALERT_STATE_ACKNOWLEDGED, "acknowledged"},
		{AlertState_ALERT_STATE_RESOLVED, "resolved"}, {AlertState_ALERT_STATE_CLOSED, "closed"},
	}}
	nodeStateNames = enumNames[NodeState]{what: "node state", values: []enumName[NodeState]{
		{NodeState_NODE_STATE_READY, "ready"}, {NodeState_NODE_STATE_STALE, "stale"}, {NodeState_NODE_STATE_DOWN, "down"},
	}}
)

// Name is the event level as rules, templates and the printer spell it:
// success, warning, critical; "unspecified" for the zero value.
func (l Level) Name() string { return levelNames.name(l) }

// ParseLevel reads an event level as operators write it (any case).
func ParseLevel(s string) (Level, error) { return levelNames.parse(s) }

// Name is the check status as templates spell it: ok, warning, critical,
// unknown.
func (s CheckStatus) Name() string { return checkStatusNames.name(s) }

// ParseCheckStatus reads a check status as operators write it (any case).
func ParseCheckStatus(s string) (CheckStatus, error) { return checkStatusNames.parse(s) }

// Name is the alert level as operators read and write it: fatal, critical,
// warning; "unspecified" for the zero value.
func (l AlertLevel) Name() string { return alertLevelNames.name(l) }

// ParseAlertLevel reads an alert level as operators write it (any case).
func ParseAlertLevel(s string) (AlertLevel, error) { return alertLevelNames.parse(s) }

// Name is the alert state as operators read and write it: open,
// acknowledged, resolved, closed; "unspecified" for the zero value.
func (s AlertState) Name() string { return alertStateNames.name(s) }

// ParseAlertState reads an alert state as operators write it (any case).
func ParseAlertState(s string) (AlertState, error) { return alertStateNames.parse(s) }

// Name is the node state in lower case: ready, stale, down; "unspecified"
// for a node not yet judged.
func (s NodeState) Name() string { return nodeStateNames.name(s) }

// ParseNodeState reads a node state as operators write it (any case).
func ParseNodeState(s string) (NodeState, error) { return nodeStateNames.parse(s) }

// DisplayName is the node state as `unyo nodes ls` and liveness events
// spell it: Ready, Stale, Down; Unknown for a node not yet judged.
func (s NodeState) DisplayName() string {
	if !nodeStateNames.has(s) {
		return "Unknown"
	}
	n := s.Name()
	return strings.ToUpper(n[:1]) + n[1:]
}

// EnumName is the name operators read for value v of the enum ed, as the
// CLI's JSON and YAML print it; ok is false for an enum this table does not
// name (the caller then keeps protojson's spelling).
func EnumName(ed protoreflect.EnumDescriptor, v protoreflect.EnumNumber) (name string, ok bool) {
	t, ok := enumTable(ed)
	if !ok {
		return "", false
	}
	return t.nameOf(int32(v)), true
}

// ParseEnumName reads a value of the enum ed as operators write it (any
// case). The generated names (LEVEL_CRITICAL) are accepted too, so that
// documents printed before the names existed still apply. ok is false for
// an enum this table does not name.
func ParseEnumName(ed protoreflect.EnumDescriptor, s string) (v protoreflect.EnumNumber, ok bool, err error) {
	t, ok := enumTable(ed)
	if !ok {
		return 0, false, nil
	}
	if ev := ed.Values().ByName(protoreflect.Name(strings.TrimSpace(s))); ev != nil {
		return ev.Number(), true, nil
	}
	n, err := t.parseName(s)
	return protoreflect.EnumNumber(n), true, err
}

// anyEnumNames is enumNames of any enum, for lookups by descriptor.
type anyEnumNames interface {
	nameOf(v int32) string
	parseName(s string) (int32, error)
}

func enumTable(ed protoreflect.EnumDescriptor) (anyEnumNames, bool) {
	switch ed.FullName() {
	case Level(0).Descriptor().FullName():
		return levelNames, true
	case CheckStatus(0).Descriptor().FullName():
		return checkStatusNames, true
	case AlertLevel(0).Descriptor().FullName():
		return alertLevelNames, true
	case AlertState(0).Descriptor().FullName():
		return alertStateNames, true
	case NodeState(0).Descriptor().FullName():
		return nodeStateNames, true
	}
	return nil, false
}

func (t enumNames[E]) nameOf(v int32) string { return t.name(E(v)) }

func (t enumNames[E]) parseName(s string) (int32, error) {
	v, err := t.parse(s)
	return int32(v), err
}

type enumName[E ~int32] struct {
	value E
	name  string
}

// enumNames is one enum's table. The zero value of every enum is
// unspecified: it has a name but does not parse, since no operator means it.
type enumNames[E ~int32] struct {
	what   string        // "alert level", for errors
	values []enumName[E] // in the order errors list them
}

func (t enumNames[E]) name(v E) string {
	if v == 0 && !t.has(0) {
		return "unspecified"
	}
	for _, n := range t.values {
		if n.value == v {
			return n.name
		}
	}
	return fmt.Sprintf("%s(%d)", strings.ReplaceAll(t.what, " ", "_"), int32(v))
}

func (t enumNames[E]) has(v E) bool {
	for _, n := range t.values {
		if n.value == v {
			return true
		}
	}
	return false
}

func (t enumNames[E]) parse(s string) (E, error) {
	want := strings.ToLower(strings.TrimSpace(s))
	names := make([]string, len(t.values))
	for i, n := range t.values {
		if n.name == want {
			return n.value, nil
		}
		names[i] = n.name
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return 0, fmt.Errorf("unknown %s %q: expected %s", t.what, s, list)
}
