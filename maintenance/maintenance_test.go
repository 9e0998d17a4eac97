package maintenance_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/maintenance"
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

func rfc(t time.Time) string { return t.Format(time.RFC3339) }

func mnt(name string, spec *unyov1.MaintenanceSpec) *unyov1.Maintenance {
	if spec.Owner == "" {
		spec.Owner = "alice"
	}
	if spec.Reason == "" {
		spec.Reason = "replacing disks"
	}
	return &unyov1.Maintenance{Name: name, Cluster: "tokyo", Spec: spec, CreatedAt: timestamppb.New(t0)}
}

func compile(t *testing.T, m *unyov1.Maintenance) maintenance.Window {
	t.Helper()
	w, err := maintenance.Compile(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestCompileInvalid(t *testing.T) {
	tests := []struct {
		name string
		m    *unyov1.Maintenance
		want []string // "field: description substring", in order
	}{
		{
			name: "no spec",
			m:    &unyov1.Maintenance{Name: "Bad Name"},
			want: []string{`name: "Bad Name" is not a valid name`, "spec: required"},
		},
		{
			name: "owner and reason",
			m:    &unyov1.Maintenance{Name: "m", Spec: &unyov1.MaintenanceSpec{Owner: " ", Nodes: []string{"web1"}}},
			want: []string{"spec.owner: required", "spec.reason: required"},
		},
		{
			name: "scope entries",
			m:    mnt("m", &unyov1.MaintenanceSpec{Nodes: []string{"web1", "", "web("}, Checks: []string{"disk", "[a-"}}),
			want: []string{
				"spec.nodes[1]: is empty",
				`spec.nodes[2]: "web(" is neither a name nor a valid regular expression: missing closing ): ` + "`web(`",
				`spec.checks[1]: "[a-" is neither a name nor a valid regular expression: missing closing ]: ` + "`[a-`",
			},
		},
		{
			name: "times",
			m:    mnt("m", &unyov1.MaintenanceSpec{Start: "tomorrow", End: "2026-03-01 03:00"}),
			want: []string{`spec.start: invalid time "tomorrow" (expected an RFC 3339`, `spec.end: invalid time "2026-03-01 03:00"`},
		},
		{
			name: "end before start",
			m:    mnt("m", &unyov1.MaintenanceSpec{Start: "2026-03-01T03:00:00Z", End: "2026-03-01T11:00:00+09:00"}),
			want: []string{"spec.end: 2026-03-01T11:00:00+09:00 is not after the start 2026-03-01T03:00:00Z"},
		},
		{
			name: "end before the default start",
			m:    mnt("m", &unyov1.MaintenanceSpec{End: rfc(t0.Add(-time.Hour))}),
			want: []string{"spec.end: 2026-03-01T01:00:00Z is not after the start 2026-03-01T02:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := maintenance.Compile(tt.m, t0)
			var ve *maintenance.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if len(ve.Fields) != len(tt.want) {
				t.Fatalf("got %d field errors, want %d:\n%v", len(ve.Fields), len(tt.want), err)
			}
			for i, f := range ve.Fields {
				if !strings.Contains(f.Error(), tt.want[i]) {
					t.Errorf("field error %d = %q\nwant it to contain %q", i, f.Error(), tt.want[i])
				}
			}
			prefix := "maintenance " + `"` + tt.m.GetName() + `": `
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, prefix) {
					t.Errorf("line %q does not start with %q", line, prefix)
				}
			}
		})
	}
}

func TestCompileTimes(t *testing.T) {
	tests := []struct {
		name       string
		m          *unyov1.Maintenance
		start, end time.Time
	}{
		{"start defaults to created_at", mnt("m", &unyov1.MaintenanceSpec{}), t0, time.Time{}},
		{"start defaults to now when not stored", &unyov1.Maintenance{Name: "m", Spec: &unyov1.MaintenanceSpec{Owner: "a", Reason: "r"}}, t0, time.Time{}},
		{"explicit", mnt("m", &unyov1.MaintenanceSpec{Start: "2026-03-02T01:00:00+09:00", End: "2026-03-02T03:30:00+09:00"}),
			time.Date(2026, 3, 1, 16, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 18, 30, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := compile(t, tt.m)
			if !w.Start.Equal(tt.start) || !w.End.Equal(tt.end) {
				t.Errorf("start, end = %v, %v; want %v, %v", w.Start, w.End, tt.start, tt.end)
			}
			if w.Owner == "" || w.Reason == "" || w.Name != "m" {
				t.Errorf("record fields not copied: %+v", w)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	start, end := t0.Add(time.Hour), t0.Add(3*time.Hour)
	planned := func() *unyov1.Maintenance {
		return mnt("m", &unyov1.MaintenanceSpec{Start: rfc(start), End: rfc(end)})
	}
	openEnded := mnt("m", &unyov1.MaintenanceSpec{Start: rfc(start)})
	endedEarly := planned()
	endedEarly.EndedAt, endedEarly.EndedBy = timestamppb.New(start.Add(30*time.Minute)), "bob"
	cancelled := planned()
	cancelled.EndedAt = timestamppb.New(t0.Add(10 * time.Minute))
	openEndedStopped := mnt("m", &unyov1.MaintenanceSpec{Start: rfc(start)})
	openEndedStopped.EndedAt = timestamppb.New(start.Add(48 * time.Hour))

	tests := []struct {
		name string
		m    *unyov1.Maintenance
		at   time.Time
		want string
	}{
		{"before start", planned(), start.Add(-time.Second), "planned"},
		{"at start", planned(), start, "active"},
		{"during", planned(), start.Add(time.Hour), "active"},
		{"just before end", planned(), end.Add(-time.Nanosecond), "active"},
		{"at end", planned(), end, "ended"},
		{"after end", planned(), end.Add(time.Hour), "ended"},
		{"open-ended, planned", openEnded, start.Add(-time.Minute), "planned"},
		{"open-ended, a year on", openEnded, start.Add(365 * 24 * time.Hour), "active"},
		{"ended early, before ended_at", endedEarly, start.Add(29 * time.Minute), "active"},
		{"ended early, at ended_at", endedEarly, start.Add(30 * time.Minute), "ended"},
		{"ended early, before the planned end", endedEarly, end.Add(-time.Minute), "ended"},
		{"cancelled before it started", cancelled, start.Add(time.Minute), "ended"},
		{"cancelled, before the cancellation", cancelled, t0, "planned"},
		{"open-ended, ended", openEndedStopped, start.Add(49 * time.Hour), "ended"},
		{"open-ended, before ended_at", openEndedStopped, start.Add(47 * time.Hour), "active"},
		{"invalid record", &unyov1.Maintenance{Name: "m"}, t0, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maintenance.Status(tt.m, tt.at); got != tt.want {
				t.Errorf("Status = %q, want %q", got, tt.want)
			}
			if w, err := maintenance.Compile(tt.m, t0); err == nil {
				if got, want := w.Active(tt.at), tt.want == "active"; got != want {
					t.Errorf("Active = %v, want %v", got, want)
				}
			}
		})
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		name          string
		nodes, checks []string
		node, check   string
		want          bool
	}{
		{"everything", nil, nil, "any", "thing", true},
		{"exact node", []string{"web1"}, nil, "web1", "disk", true},
		{"exact node is not a prefix", []string{"web1"}, nil, "web10", "disk", false},
		{"dots in a name are literal", []string{"db1.example"}, nil, "db1xexample", "disk", false},
		{"dotted name matches itself", []string{"db1.example"}, nil, "db1.example", "disk", true},
		{"regex", []string{"web.*"}, nil, "web12", "disk", true},
		{"regex is anchored at the start", []string{"web.*"}, nil, "myweb1", "disk", false},
		{"regex is anchored at the end", []string{"web[0-9]"}, nil, "web12", "disk", false},
		{"alternation is anchored as a whole", []string{"web1|db1"}, nil, "db1x", "disk", false},
		{"alternation", []string{"web1|db1"}, nil, "db1", "disk", true},
		{"any entry", []string{"db1", "web[0-9]+"}, nil, "web7", "disk", true},
		{"check only", nil, []string{"disk"}, "anynode", "disk", true},
		{"check only, other check", nil, []string{"disk"}, "anynode", "load", false},
		{"both must hold", []string{"web.*"}, []string{"disk|load"}, "web1", "load", true},
		{"both must hold, node fails", []string{"web.*"}, []string{"disk|load"}, "db1", "load", false},
		{"both must hold, check fails", []string{"web.*"}, []string{"disk|load"}, "web1", "http", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := compile(t, mnt("m", &unyov1.MaintenanceSpec{Nodes: tt.nodes, Checks: tt.checks}))
			if got := w.Covers(tt.node, tt.check); got != tt.want {
				t.Errorf("Covers(%q, %q) = %v, want %v", tt.node, tt.check, got, tt.want)
			}
		})
	}
}

func TestSilences(t *testing.T) {
	w := compile(t, mnt("m", &unyov1.MaintenanceSpec{Nodes: []string{"web.*"}, End: rfc(t0.Add(time.Hour))}))
	ev := func(cluster, node string) *unyov1.Event {
		return &unyov1.Event{Cluster: cluster, Node: node, Check: "disk"}
	}
	tests := []struct {
		name string
		e    *unyov1.Event
		at   time.Time
		want bool
	}{
		{"covered and active", ev("tokyo", "web1"), t0, true},
		{"event without cluster", ev("", "web1"), t0, true},
		{"not covered", ev("tokyo", "db1"), t0, false},
		{"ended", ev("tokyo", "web1"), t0.Add(time.Hour), false},
		{"planned", ev("tokyo", "web1"), t0.Add(-time.Minute), false},
		{"other cluster", ev("osaka", "web1"), t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.Silences(tt.e, tt.at); got != tt.want {
				t.Errorf("Silences = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSet(t *testing.T) {
	later := mnt("b-web", &unyov1.MaintenanceSpec{Nodes: []string{"web.*"}})
	first := mnt("a-web1", &unyov1.MaintenanceSpec{Nodes: []string{"web1"}, Start: rfc(t0.Add(time.Hour))})
	dbs := mnt("c-db", &unyov1.MaintenanceSpec{Nodes: []string{"db.*"}, End: rfc(t0.Add(time.Hour))})
	broken := &unyov1.Maintenance{Name: "broken"}

	set, errs := maintenance.Compiled([]*unyov1.Maintenance{dbs, later, broken, first}, t0)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `maintenance "broken"`) {
		t.Errorf("errs = %v, want one for broken", errs)
	}
	if set.Len() != 3 {
		t.Fatalf("Len = %d, want 3", set.Len())
	}
	var names []string
	for _, w := range set.Windows() {
		names = append(names, w.Name)
	}
	if strings.Join(names, " ") != "a-web1 b-web c-db" {
		t.Errorf("windows = %v, want sorted by name", names)
	}

	tests := []struct {
		name   string
		node   string
		at     time.Time
		want   string
		wantOK bool
	}{
		{"only b is active yet", "web1", t0, "b-web", true},
		{"a sorts first once active", "web1", t0.Add(2 * time.Hour), "a-web1", true},
		{"a does not cover web2", "web2", t0.Add(2 * time.Hour), "b-web", true},
		{"db during its window", "db1", t0, "c-db", true},
		{"db after its window", "db1", t0.Add(time.Hour), "", false},
		{"nothing covers lb1", "lb1", t0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, ok := set.Silencing(&unyov1.Event{Cluster: "tokyo", Node: tt.node, Check: "disk"}, tt.at)
			if name != tt.want || ok != tt.wantOK {
				t.Errorf("Silencing = %q, %v; want %q, %v", name, ok, tt.want, tt.wantOK)
			}
		})
	}

	var empty maintenance.Set
	if _, ok := empty.Silencing(&unyov1.Event{Node: "web1"}, t0); ok {
		t.Error("the zero Set silenced an event")
	}
}
