package builtin

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// TestKindsCoverObject keeps the registry and Object's oneof in step: a
// message added to the oneof needs a registration, and a registration
// needs its message in the oneof (New refuses it otherwise).
func TestKindsCoverObject(t *testing.T) {
	reg := Kinds()
	oneof := (&unyov1.Object{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	if got, want := len(reg.Names()), oneof.Fields().Len(); got != want {
		t.Errorf("%d kinds registered, Object's oneof has %d members", got, want)
	}
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		name := string(fd.Message().Name())
		k, ok := reg.Lookup(name)
		if !ok {
			t.Errorf("Object's oneof member %s has no registration in builtin.Kinds", name)
			continue
		}
		if k.Type().Descriptor() != fd.Message() {
			t.Errorf("%s: message type %s", name, k.Type().Descriptor().FullName())
		}
		o, m := k.New()
		m.ProtoReflect().Set(m.ProtoReflect().Descriptor().Fields().ByName("name"), protoreflect.ValueOfString("x"))
		if kinds.KindOf(o) != name || kinds.Name(o) != "x" || !proto.Equal(kinds.Message(o), m) || !proto.Equal(kinds.Wrap(m), o) {
			t.Errorf("%s: New, Wrap, Message, KindOf and Name do not agree: %v", name, o)
		}
		if fd := m.ProtoReflect().Descriptor().Fields().ByName("spec"); fd != nil && fd.Kind() != protoreflect.MessageKind {
			t.Errorf("%s: spec is not a message", name)
		}
		if k.Noun == "" || k.Help == "" || len(k.Columns) == 0 {
			t.Errorf("%s: registered without CLI noun, help or table columns", name)
		}
	}
}

func TestParse(t *testing.T) {
	reg := Kinds()
	for in, want := range map[string]string{
		"Check": "Check", "check": "Check", "checks": "Check", "CHECKS": "Check",
		"EventRule": "EventRule", "eventrules": "EventRule", "rule": "EventRule", "rules": "EventRule",
		"maintenance": "Maintenance", "maint": "Maintenance", "Maintenances": "Maintenance",
	} {
		if k, err := reg.Parse(in); err != nil || k.Name != want {
			t.Errorf("Parse(%q) = %q, %v; want %s", in, k.Name, err, want)
		}
	}
	_, err := reg.Parse("xml")
	if err == nil || err.Error() != `unknown kind "xml" (known kinds: Check, EventRule, Maintenance, Region, Datacenter, Floor, Rack, PhysicalResource, Cluster, Flavor, Image, Network, RegionService, Compute, Loadbalancer)` {
		t.Errorf("Parse(xml): %v", err)
	}
}

func TestValidate(t *testing.T) {
	reg := Kinds()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	good := &unyov1.Check{Name: "disk", Spec: &unyov1.CheckSpec{Command: []string{"check_disk"}, Interval: "1m"}}
	many := map[string]string{}
	for i := range 101 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	tests := []struct {
		name string
		objs []*unyov1.Object
		want []string // parts of the error; none: valid
	}{
		{"valid check", []*unyov1.Object{kinds.Wrap(good)}, nil},
		{"no kind", []*unyov1.Object{kinds.Wrap(good), {}}, []string{"objects[1]: no kind set"}},
		{"domain validation", []*unyov1.Object{kinds.Wrap(&unyov1.Check{Name: "disk"})}, []string{"objects[0]: "}},
		{"top-level labels bounded", []*unyov1.Object{kinds.Wrap(&unyov1.Check{Name: "disk", Labels: many, Spec: good.Spec})},
			[]string{`objects[0] (Check "disk"): labels: 101 labels`}},
		{"kind's own label sets bounded", []*unyov1.Object{kinds.Wrap(&unyov1.EventRule{Name: "r",
			Spec: &unyov1.EventRuleSpec{Type: "filter", Match: &unyov1.EventMatch{Labels: many}}})},
			[]string{`objects[0] (EventRule "r"): spec.match.labels: 101 labels`}},
	}
	for _, tt := range tests {
		err := reg.Validate(tt.objs, now)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != nil && err == nil:
			t.Errorf("%s: no error", tt.name)
		case err != nil:
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tt.name, err, w)
				}
			}
		}
	}
}

func TestPrepareAndCount(t *testing.T) {
	reg := Kinds()
	c := kinds.Wrap(&unyov1.Check{Name: "disk", Source: "local"})
	r := kinds.Wrap(&unyov1.EventRule{Name: "page", Matched: 7})
	reg.Prepare([]*unyov1.Object{c, r})
	if c.GetCheck().GetSource() != "central" {
		t.Errorf("a check applied through the API has source %q, want central", c.GetCheck().GetSource())
	}
	if r.GetEventRule().GetMatched() != 0 {
		t.Errorf("Prepare kept the matched count a client sent: %d", r.GetEventRule().GetMatched())
	}
	reg.ShowCount(r, 3)
	reg.ShowCount(c, 3) // a Check shows no count
	if r.GetEventRule().GetMatched() != 3 {
		t.Errorf("ShowCount: matched = %d, want 3", r.GetEventRule().GetMatched())
	}
}

func TestColumns(t *testing.T) {
	reg := Kinds()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		msg  proto.Message
		want map[string]string // header -> cell
	}{
		{&unyov1.Check{Name: "m", Spec: &unyov1.CheckSpec{Cron: "0 * * * *", Metric: &unyov1.MetricCheck{Expr: "up == 0"}}},
			map[string]string{"SCHEDULE": "0 * * * *", "COMMAND": "metric: up == 0", "SELECTOR": "<all>"}},
		{&unyov1.EventRule{Name: "r", Matched: 4, Spec: &unyov1.EventRuleSpec{Continue: true,
			Match:   &unyov1.EventMatch{Node: "web*", Levels: []string{"critical"}, Labels: map[string]string{"team": "db"}},
			Actions: []*unyov1.Action{{Kind: &unyov1.Action_CreateAlert{CreateAlert: &unyov1.CreateAlertAction{}}}}}},
			map[string]string{"MATCH": "node=web* level=critical team=db", "ACTIONS": "create_alert,continue", "MATCHED": "4"}},
		{&unyov1.Maintenance{Name: "m", Spec: &unyov1.MaintenanceSpec{Start: "2025-06-02T00:00:00Z"}}, map[string]string{"STATUS": "planned"}},
		{&unyov1.Maintenance{Name: "m", Spec: &unyov1.MaintenanceSpec{End: "2025-05-01T00:00:00Z"}}, map[string]string{"STATUS": "ended"}},
		{&unyov1.Maintenance{Name: "m"}, map[string]string{"STATUS": "active"}},
	}
	for _, tt := range tests {
		k, m, _ := reg.Of(kinds.Wrap(tt.msg))
		got := map[string]string{}
		for _, c := range k.Columns {
			got[c.Header] = c.Cell(m, now)
		}
		for h, want := range tt.want {
			if got[h] != want {
				t.Errorf("%s %s: %s = %q, want %q", k.Name, kinds.Name(kinds.Wrap(tt.msg)), h, got[h], want)
			}
		}
	}
}
