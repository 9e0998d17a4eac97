package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
)

func manyLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

// TestRegisterLimits: what an agent says about its node is bounded and
// named in the refusal.
func TestRegisterLimits(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		node *unyov1.Node
		want string // "" accepted
	}{
		{"plain", &unyov1.Node{Name: "web-1", Address: "10.0.0.5:7070", Labels: map[string]string{"team": "ops"}}, ""},
		{"ipv6 address", &unyov1.Node{Name: "web-2", Address: "[::1]:7070"}, ""},
		{"no address", &unyov1.Node{Name: "web-3"}, ""},
		{"bad name", &unyov1.Node{Name: "Web 1"}, "node.name"},
		{"too many labels", &unyov1.Node{Name: "web-4", Labels: manyLabels(limits.MaxLabels + 1)}, "node.labels: 101 labels, at most 100 are allowed"},
		{"long key", &unyov1.Node{Name: "web-4", Labels: map[string]string{strings.Repeat("k", 200): "v"}}, "is 200 bytes, at most 128 are allowed"},
		{"long value", &unyov1.Node{Name: "web-4", Labels: map[string]string{"big": strings.Repeat("v", 2048)}}, `node.labels["big"]: value is 2048 bytes, at most 1024 are allowed`},
		{"empty key", &unyov1.Node{Name: "web-4", Labels: map[string]string{"": "v"}}, "node.labels: a label key must not be empty"},
		{"CRLF in address", &unyov1.Node{Name: "web-4", Address: "10.0.0.5:7070\r\nX-Evil: 1"}, "node.address"},
		{"space in address", &unyov1.Node{Name: "web-4", Address: "10.0.0.5 :7070"}, "node.address"},
		{"URL as address", &unyov1.Node{Name: "web-4", Address: "http://169.254.169.254/latest"}, "node.address"},
		{"no port", &unyov1.Node{Name: "web-4", Address: "10.0.0.5"}, "node.address: \"10.0.0.5\" is not host:port"},
		{"port out of range", &unyov1.Node{Name: "web-4", Address: "10.0.0.5:70000"}, "not a number from 1 to 65535"},
		{"long os", &unyov1.Node{Name: "web-4", Os: strings.Repeat("x", 5000)}, "node.os: 5000 bytes, at most 1024 are allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.c.Agent.Register(context.Background(), connect.NewRequest(&unyov1.RegisterRequest{Node: tt.node}))
			checkRefusal(t, err, tt.want)
		})
	}
}

func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %v, want InvalidArgument naming %q", err, want)
	}
}

// TestReportedResultLimits: results with a bad check name or times out of
// bounds are rejected with the reason; oversized outputs are cut and marked.
func TestReportedResultLimits(t *testing.T) {
	e := newEnv(t, "n1")
	now := time.Now()
	result := func(mod func(*unyov1.Event)) *unyov1.Event {
		ev := &unyov1.Event{Id: uuid.NewString(), Node: "n1", Check: "disk", Level: unyov1.Level_LEVEL_SUCCESS, Output: "OK", StartedAt: timestamppb.New(now)}
		mod(ev)
		return ev
	}
	tests := []struct {
		name string
		ev   *unyov1.Event
		want string // "" accepted
	}{
		{"plain", result(func(*unyov1.Event) {}), ""},
		{"from a spool after a long outage", result(func(ev *unyov1.Event) { ev.StartedAt = timestamppb.New(now.Add(-29 * 24 * time.Hour)) }), ""},
		{"slightly ahead", result(func(ev *unyov1.Event) { ev.StartedAt = timestamppb.New(now.Add(5 * time.Minute)) }), ""},
		{"check name with spaces", result(func(ev *unyov1.Event) { ev.Check = "Disk Usage" }), "check: \"Disk Usage\" is not a valid name"},
		{"empty check", result(func(ev *unyov1.Event) { ev.Check = "" }), "check: required"},
		{"year 1", result(func(ev *unyov1.Event) { ev.StartedAt = timestamppb.New(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)) }), "started_at: 0001-01-01T00:00:00Z is more than 30 days before the cluster's clock"},
		{"year 9999", result(func(ev *unyov1.Event) { ev.StartedAt = timestamppb.New(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)) }), "started_at: 9999-01-01T00:00:00Z is more than 10m0s after the cluster's clock"},
		{"beyond the timestamp range", result(func(ev *unyov1.Event) { ev.StartedAt = &timestamppb.Timestamp{Seconds: 1 << 62} }), "started_at:"},
		{"31 days old", result(func(ev *unyov1.Event) { ev.StartedAt = timestamppb.New(now.Add(-31 * 24 * time.Hour)) }), "more than 30 days before"},
		{"long perfdata label", result(func(ev *unyov1.Event) { ev.Perfdata = []*unyov1.PerfData{{Label: strings.Repeat("p", 2000)}} }), "perfdata[0].label: 2000 bytes, at most 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := e.c.Agent.ReportResults(context.Background(), connect.NewRequest(&unyov1.ReportResultsRequest{Node: "n1", Results: []*unyov1.Event{tt.ev}}))
			if err != nil {
				t.Fatal(err)
			}
			rejected := strings.Join(resp.Msg.GetRejected(), "\n")
			switch {
			case tt.want == "" && (resp.Msg.GetAccepted() != 1 || rejected != ""):
				t.Fatalf("not accepted: %v", resp.Msg)
			case tt.want != "" && !strings.Contains(rejected, tt.want):
				t.Fatalf("rejected = %q, want it to name %q", rejected, tt.want)
			}
		})
	}
}

func TestOversizedResultIsCutAndMarked(t *testing.T) {
	e := newEnv(t, "n1")
	perf := make([]*unyov1.PerfData, limits.MaxPerfdata+500)
	for i := range perf {
		perf[i] = &unyov1.PerfData{Label: fmt.Sprintf("p%d", i), Value: float64(i)}
	}
	ev := &unyov1.Event{
		Id: uuid.NewString(), Node: "n1", Check: "noisy", Level: unyov1.Level_LEVEL_WARNING,
		Output: strings.Repeat("o", 2<<20), LongOutput: strings.Repeat("é", 1<<20), Perfdata: perf, StartedAt: timestamppb.Now(),
	}
	resp, err := e.c.Agent.ReportResults(context.Background(), connect.NewRequest(&unyov1.ReportResultsRequest{Node: "n1", Results: []*unyov1.Event{ev}}))
	if err != nil || resp.Msg.GetAccepted() != 1 {
		t.Fatalf("report: %v %v", resp, err)
	}
	got, err := e.c.Events.GetEvent(context.Background(), connect.NewRequest(&unyov1.GetEventRequest{Id: ev.Id}))
	if err != nil {
		t.Fatal(err)
	}
	stored := got.Msg.GetEvents()[0]
	if !stored.GetTruncated() || len(stored.GetOutput()) != limits.MaxOutput || len(stored.GetPerfdata()) != limits.MaxPerfdata {
		t.Fatalf("stored: truncated=%v output=%d bytes perfdata=%d, want cut to %d bytes and %d items",
			stored.GetTruncated(), len(stored.GetOutput()), len(stored.GetPerfdata()), limits.MaxOutput, limits.MaxPerfdata)
	}
	long := stored.GetLongOutput()
	for _, want := range []string{"cut output from 2097152 to 1048576 bytes", "cut long_output from 2097152 to 1048576 bytes", "kept 1000 of 1500 perfdata items"} {
		if !strings.Contains(long, want) {
			t.Errorf("long output does not say %q (ends %q)", want, long[max(0, len(long)-300):])
		}
	}
	if !strings.HasPrefix(long, "éé") || strings.Contains(long, "\uFFFD") {
		t.Errorf("long output was not cut at a character boundary")
	}
}

func TestObjectLabelAndListLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	check := &unyov1.Check{Name: "labelled", Labels: manyLabels(limits.MaxLabels + 1), Spec: &unyov1.CheckSpec{Command: []string{"true"}, Interval: "10s"}}
	_, err := e.c.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{{Kind: &unyov1.Object_Check{Check: check}}}}))
	checkRefusal(t, err, `objects[0] (Check "labelled"): labels: 101 labels, at most 100 are allowed`)

	sel := &unyov1.Check{Name: "selective", Spec: &unyov1.CheckSpec{Command: []string{"true"}, Interval: "10s", NodeSelector: map[string]string{"role": strings.Repeat("x", 4096)}}}
	_, err = e.c.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{{Kind: &unyov1.Object_Check{Check: sel}}}}))
	checkRefusal(t, err, `spec.node_selector["role"]: value is 4096 bytes`)

	_, err = e.c.Events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{History: true, Limit: limits.MaxListLimit + 1}))
	checkRefusal(t, err, "limit: 10001 is more than the maximum of 10000")
	_, err = e.c.Alerts.ListAlerts(ctx, connect.NewRequest(&unyov1.ListAlertsRequest{Limit: -5}))
	checkRefusal(t, err, "limit: -5 is negative")
	_, err = e.c.Events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{History: true, Limit: limits.MaxListLimit}))
	checkRefusal(t, err, "")
}

// TestRequestsNamingNothingAreRefused: a read or change that names no
// object is refused with the field, not answered NotFound.
func TestRequestsNamingNothingAreRefused(t *testing.T) {
	c := newEnv(t).c
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"Get without a name", func() error {
			_, err := c.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Check"}}))
			return err
		}, "ref.name: required"},
		{"Delete without a name", func() error {
			_, err := c.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: "Check", Name: "a"}, {Kind: "Check"}}}))
			return err
		}, "refs[1].name: required"},
		{"GetNode {}", func() error {
			_, err := c.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{}))
			return err
		}, "name: required"},
		{"GetEvent {}", func() error {
			_, err := c.Events.GetEvent(ctx, connect.NewRequest(&unyov1.GetEventRequest{}))
			return err
		}, "id: required"},
		{"GetAlert {}", func() error {
			_, err := c.Alerts.GetAlert(ctx, connect.NewRequest(&unyov1.GetAlertRequest{}))
			return err
		}, "id: required"},
		{"CloseAlert without an id", func() error {
			_, err := c.Alerts.CloseAlert(ctx, connect.NewRequest(&unyov1.AlertActionRequest{By: "ops"}))
			return err
		}, "id: required"},
		{"EndMaintenance without a name", func() error {
			_, err := c.Maintenance.EndMaintenance(ctx, connect.NewRequest(&unyov1.EndMaintenanceRequest{By: "ops"}))
			return err
		}, "name: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRefusal(t, tt.call(), tt.want) })
	}
}
