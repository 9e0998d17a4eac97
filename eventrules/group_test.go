package eventrules_test

import (
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

func TestGroupKey(t *testing.T) {
	e := &unyov1.Event{
		Cluster: "tokyo", Node: "web1", Check: "disk", Level: critical,
		Labels: map[string]string{"team": "ops", "odd": "a,b=c%"},
	}
	tests := []struct {
		name    string
		groupBy []string
		event   *unyov1.Event
		want    string
	}{
		{"no group_by: one group", nil, e, ""},
		{"node and check", []string{"node", "check"}, e, "check=disk,node=web1"},
		{"order does not matter", []string{"check", "node"}, e, "check=disk,node=web1"},
		{"level as a word", []string{"level"}, e, "level=critical"},
		{"cluster", []string{"cluster"}, e, "cluster=tokyo"},
		{"label", []string{"label:team", "node"}, e, "label:team=ops,node=web1"},
		{"missing label is empty", []string{"label:owner"}, e, "label:owner="},
		{"separators in values are escaped", []string{"label:odd", "node"}, e, "label:odd=a%2Cb%3Dc%25,node=web1"},
		{"separators in label names are escaped", []string{"label:a=b"}, e, "label:a%3Db="},
		{"empty event", []string{"node", "level"}, &unyov1.Event{}, "level=unspecified,node="},
		{"nil event", []string{"node"}, nil, "node="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec("aggregate", &unyov1.EventMatch{Node: ".*"})
			s.GroupBy = tt.groupBy
			r := mustCompile(t, "g", s)
			if got := eventrules.GroupKey(r, tt.event); got != tt.want {
				t.Errorf("GroupKey = %q, want %q", got, tt.want)
			}
		})
	}
}

// Values that differ must give different keys even when they contain the
// separators.
func TestGroupKeyUnambiguous(t *testing.T) {
	s := spec("aggregate", &unyov1.EventMatch{Node: ".*"})
	s.GroupBy = []string{"node", "check"}
	r := mustCompile(t, "g", s)
	a := eventrules.GroupKey(r, &unyov1.Event{Node: "x", Check: "y,node=z"})
	b := eventrules.GroupKey(r, &unyov1.Event{Node: "z", Check: "y"})
	if a == b {
		t.Errorf("distinct events share the key %q", a)
	}
}

func TestWindowEnd(t *testing.T) {
	s := spec("aggregate", &unyov1.EventMatch{Node: ".*"})
	s.Wait = "5m"
	r := mustCompile(t, "g", s)
	first := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if got, want := r.WindowEnd(first), first.Add(5*time.Minute); !got.Equal(want) {
		t.Errorf("WindowEnd = %v, want %v", got, want)
	}
}
