package unyov1_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestNames checks every value of every named enum: it has a name, the name
// parses back to it (the zero value excepted: no operator means
// "unspecified"), and parsing ignores case and surrounding space.
func TestNames(t *testing.T) {
	type enum struct {
		desc  protoreflect.EnumDescriptor
		name  func(int32) string
		parse func(string) (int32, error)
	}
	for _, e := range []enum{
		{unyov1.Level(0).Descriptor(), func(v int32) string { return unyov1.Level(v).Name() },
			func(s string) (int32, error) { v, err := unyov1.ParseLevel(s); return int32(v), err }},
		{unyov1.CheckStatus(0).Descriptor(), func(v int32) string { return unyov1.CheckStatus(v).Name() },
			func(s string) (int32, error) { v, err := unyov1.ParseCheckStatus(s); return int32(v), err }},
		{unyov1.AlertLevel(0).Descriptor(), func(v int32) string { return unyov1.AlertLevel(v).Name() },
			func(s string) (int32, error) { v, err := unyov1.ParseAlertLevel(s); return int32(v), err }},
		{unyov1.AlertState(0).Descriptor(), func(v int32) string { return unyov1.AlertState(v).Name() },
			func(s string) (int32, error) { v, err := unyov1.ParseAlertState(s); return int32(v), err }},
		{unyov1.NodeState(0).Descriptor(), func(v int32) string { return unyov1.NodeState(v).Name() },
			func(s string) (int32, error) { v, err := unyov1.ParseNodeState(s); return int32(v), err }},
	} {
		vals := e.desc.Values()
		for i := range vals.Len() {
			v := int32(vals.Get(i).Number())
			full := string(vals.Get(i).Name())
			name := e.name(v)
			if name == "" || strings.Contains(name, "(") {
				t.Errorf("%s has no name", full)
				continue
			}
			// The name is the generated one's last word, lower case.
			if !strings.HasSuffix(strings.ToLower(full), "_"+name) {
				t.Errorf("%s is named %q", full, name)
			}
			got, err := e.parse(" " + strings.ToUpper(name) + " ")
			if strings.HasSuffix(full, "_UNSPECIFIED") {
				if err == nil {
					t.Errorf("%q parses, want an error: no operator means unspecified", name)
				}
				continue
			}
			if err != nil || got != v {
				t.Errorf("parse %q = %d, %v; want %s (%d)", name, got, err, full, v)
			}
		}
		if _, err := e.parse("nonsense"); err == nil || !strings.Contains(err.Error(), `"nonsense"`) {
			t.Errorf("%s: parse(nonsense) = %v, want an error naming it", e.desc.Name(), err)
		}
		if got := e.name(99); !strings.Contains(got, "99") {
			t.Errorf("%s: name(99) = %q, want the number", e.desc.Name(), got)
		}
	}
}

func TestParseErrorListsNames(t *testing.T) {
	_, err := unyov1.ParseAlertLevel("page")
	if want := `unknown alert level "page": expected fatal, critical or warning`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	_, err = unyov1.ParseAlertState("x")
	if want := `unknown alert state "x": expected open, acknowledged, resolved or closed`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestNodeStateDisplayName(t *testing.T) {
	for s, want := range map[unyov1.NodeState]string{
		unyov1.NodeState_NODE_STATE_UNSPECIFIED: "Unknown", unyov1.NodeState_NODE_STATE_READY: "Ready",
		unyov1.NodeState_NODE_STATE_STALE: "Stale", unyov1.NodeState_NODE_STATE_DOWN: "Down",
	} {
		if got := s.DisplayName(); got != want {
			t.Errorf("%v.DisplayName() = %q, want %q", s, got, want)
		}
	}
}

// TestEnumByDescriptor: the printer's and the manifest decoder's lookups by
// descriptor agree with the typed ones, and ParseEnumName also takes the
// generated names that documents printed before the words hold.
func TestEnumByDescriptor(t *testing.T) {
	ed := unyov1.AlertState(0).Descriptor()
	if name, ok := unyov1.EnumName(ed, protoreflect.EnumNumber(unyov1.AlertState_ALERT_STATE_CLOSED)); !ok || name != "closed" {
		t.Errorf("EnumName(closed) = %q, %v", name, ok)
	}
	for _, s := range []string{"Closed", "ALERT_STATE_CLOSED"} {
		if v, ok, err := unyov1.ParseEnumName(ed, s); !ok || err != nil || v != protoreflect.EnumNumber(unyov1.AlertState_ALERT_STATE_CLOSED) {
			t.Errorf("ParseEnumName(%q) = %d, %v, %v", s, v, ok, err)
		}
	}
	if _, ok, err := unyov1.ParseEnumName(ed, "shut"); !ok || err == nil || !strings.Contains(err.Error(), "open, acknowledged, resolved or closed") {
		t.Errorf("ParseEnumName(shut): %v, %v; want the names listed", ok, err)
	}
}
