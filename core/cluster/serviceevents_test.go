package cluster_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// RecordServiceEvent stores root's event about a service through ingest,
// labelled with the service on the cluster's own node name, and refuses
// checks root does not raise and bad statuses.
func TestRecordServiceEvent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		req  *unyov1.RecordServiceEventRequest
		code connect.Code
	}{
		{"a check root does not raise", &unyov1.RecordServiceEventRequest{Service: "web", Check: "node-liveness", Status: "OK", Output: "x"}, connect.CodeInvalidArgument},
		{"an unknown status", &unyov1.RecordServiceEventRequest{Service: "web", Check: "service-autoscale", Status: "FINE", Output: "x"}, connect.CodeInvalidArgument},
		{"no output", &unyov1.RecordServiceEventRequest{Service: "web", Check: "service-autoscale", Status: "OK"}, connect.CodeInvalidArgument},
		{"a bad service name", &unyov1.RecordServiceEventRequest{Service: "Web!", Check: "service-autoscale", Status: "OK", Output: "x"}, connect.CodeInvalidArgument},
	} {
		if _, err := e.c.Provision.RecordServiceEvent(ctx, connect.NewRequest(tc.req)); connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	resp, err := e.c.Provision.RecordServiceEvent(ctx, connect.NewRequest(&unyov1.RecordServiceEventRequest{Service: "web", Check: "service-autoscale",
		Status: "OK", Output: "web scaled from 1 to 3 replicas by the autoscaler\nscale up from 1 to 3 replicas: metric 30 / target 10 = 3"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.c.Events.GetEvent(ctx, connect.NewRequest(&unyov1.GetEventRequest{Id: resp.Msg.GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	ev := got.Msg.GetEvents()[0]
	if ev.GetCheck() != "service-autoscale" || ev.GetLabels()["service"] != "web" || ev.GetNode() == "" ||
		ev.GetOutput() != "web scaled from 1 to 3 replicas by the autoscaler" || ev.GetLongOutput() != "scale up from 1 to 3 replicas: metric 30 / target 10 = 3" ||
		ev.GetLevel() != unyov1.Level_LEVEL_SUCCESS {
		t.Errorf("stored event: %v", ev)
	}
}
