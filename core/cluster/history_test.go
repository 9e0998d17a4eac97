package cluster_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestEventHistoryByFields: the event history is found by its structured
// fields (check, outcome) through the logs API, as `unyo events history`
// asks; an output that reads like another check's history line does not
// fool it.
func TestEventHistoryByFields(t *testing.T) {
	logs, err := vlembed.Open(vlembed.Options{Path: filepath.Join(t.TempDir(), "logs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	c := startTelemetryCluster(t, cluster.Options{Logs: logs})
	ctx := t.Context()
	now := time.Now()
	result := func(id, check string, level unyov1.Level, output string) *unyov1.Event {
		return &unyov1.Event{Id: id, Node: "web1", Check: check, Level: level, StartedAt: timestamppb.New(now), Output: output}
	}
	ok, crit := unyov1.Level_LEVEL_SUCCESS, unyov1.Level_LEVEL_CRITICAL
	if _, err := c.Agent.ReportResults(ctx, connect.NewRequest(&unyov1.ReportResultsRequest{Node: "web1", Results: []*unyov1.Event{
		result("e1", "disk", ok, "OK - fine"),
		result("e2", "load", ok, "check=disk outcome=processed: OK - not disk"),
		// Occurrences 2: the first CRITICAL is pending.
		{Id: "e3", Node: "web1", Check: "disk", Level: crit, StartedAt: timestamppb.New(now.Add(time.Second)), Output: "CRITICAL", Occurrences: 2},
	}})); err != nil {
		t.Fatal(err)
	}
	history := func(fields map[string]string) ([]string, error) {
		resp, err := c.Logs.Query(ctx, connect.NewRequest(&unyov1.QueryLogsRequest{Filter: &unyov1.LogFilter{App: logstore.EventsApp, Fields: fields}}))
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, e := range resp.Msg.GetEntries() {
			ids = append(ids, e.GetFields()[logstore.FieldEventID])
		}
		slices.Sort(ids)
		return ids, nil
	}
	testutil.Eventually(t, 10*time.Second, "all three events in the history", func() error {
		ids, err := history(nil)
		if err != nil || len(ids) != 3 {
			return fmt.Errorf("history: %v, %v", ids, err)
		}
		return nil
	})
	for _, tc := range []struct {
		fields map[string]string
		want   []string
	}{
		{map[string]string{logstore.FieldCheck: "disk"}, []string{"e1", "e3"}},
		{map[string]string{logstore.FieldCheck: "disk", logstore.FieldOutcome: "processed"}, []string{"e1"}},
		{map[string]string{logstore.FieldOutcome: "pending"}, []string{"e3"}},
		{map[string]string{logstore.FieldCheck: "load"}, []string{"e2"}},
	} {
		got, err := history(tc.fields)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("history %v: got %v, want %v", tc.fields, got, tc.want)
		}
	}
}
