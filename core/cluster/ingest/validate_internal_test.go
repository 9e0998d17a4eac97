package ingest

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// BenchmarkValidate is what the cluster's checks of one reported result
// cost, to compare with a result's whole ingest (BenchmarkIngestSQLite in
// core/cluster).
func BenchmarkValidate(b *testing.B) {
	now := time.Now()
	e := &unyov1.Event{
		Id: "0190c5d6-0000-7000-8000-000000000001", Node: "node-1", Check: "check-7",
		Level: unyov1.Level_LEVEL_SUCCESS, Output: "OK - load average: 0.12, 0.08, 0.05",
		Perfdata:  []*unyov1.PerfData{{Label: "load1", Value: 0.12, Warn: "5", Crit: "10"}},
		StartedAt: timestamppb.New(now), Duration: durationpb.New(3 * time.Millisecond),
	}
	batch := Batch{Source: Agent, Node: "node-1"}
	b.ReportAllocs()
	for b.Loop() {
		if err := validEvent(e, batch, now); err != nil {
			b.Fatal(err)
		}
		capSizes(e)
	}
}
