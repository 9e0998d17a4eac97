package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// fakeMetrics keeps the series of every WriteMetrics it answers.
type fakeMetrics struct {
	unyov1connect.UnimplementedMetricsServiceHandler
	mu       sync.Mutex
	requests []int // points per request
	series   []tsdb.SeriesPoints
}

func (f *fakeMetrics) WriteMetrics(_ context.Context, req *connect.Request[unyov1.WriteMetricsRequest]) (*connect.Response[unyov1.WriteMetricsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	points := 0
	for _, b := range req.Msg.GetBatches() {
		var err error
		if f.series, err = metricbatch.Series(f.series, b, tsdb.Label{Name: "node", Value: req.Msg.GetNode()}); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		points += metricbatch.Points(b)
	}
	f.requests = append(f.requests, points)
	return connect.NewResponse(&unyov1.WriteMetricsResponse{Accepted: int32(points)}), nil
}

// TestSendMetrics: spooled collections, and the one-sample records an agent
// before MetricBatch left in its spool, reach the cluster in requests
// within its limit.
func TestSendMetrics(t *testing.T) {
	fake := &fakeMetrics{}
	mux := http.NewServeMux()
	mux.Handle(unyov1connect.NewMetricsServiceHandler(fake))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cl, err := client.New(client.Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{opts: Options{NodeName: "web1"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), cl: cl}

	// 105,000 samples of one collection: 11 records, more than one request.
	const big = 105_000
	var sb spoolBuilder
	for i := range big {
		sb.add("m", []tsdb.Label{{Name: "i", Value: strconv.Itoa(i)}}, 1000, float64(i))
	}
	sb.cut()
	records := sb.recs
	if len(records) != big/maxPointsPerRecord+1 {
		t.Fatalf("%d records, want %d of at most %d points", len(records), big/maxPointsPerRecord+1, maxPointsPerRecord)
	}
	for _, s := range []*unyov1.Sample{
		{Name: "old", Labels: map[string]string{"mode": "user"}, TimeMs: 2000, Value: 1},
		{Name: "old", Labels: map[string]string{"mode": "system"}, TimeMs: 2000, Value: 2},
	} {
		rec, err := proto.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, rec)
	}

	n, err := a.sendMetrics(t.Context(), records)
	if err != nil || n != big+2 {
		t.Fatalf("sendMetrics = %d, %v; want %d samples sent", n, err, big+2)
	}
	if len(fake.requests) != 2 || fake.requests[0] > maxPointsPerRequest || fake.requests[0]+fake.requests[1] != big+2 {
		t.Errorf("requests of %v points, want two within %d", fake.requests, maxPointsPerRequest)
	}
	got := map[string]float64{}
	for _, s := range fake.series {
		if len(s.Values) != 1 {
			t.Fatalf("series %+v, want one point", s)
		}
		got[tsdb.LabelsString(s.Name, s.Labels)] = s.Values[0]
	}
	if len(got) != big+2 || got[`m{i="104999",node="web1"}`] != 104999 || got[`old{mode="system",node="web1"}`] != 2 {
		t.Errorf("%d series at the cluster; want %d with m{i=104999} and the older agent's old{mode=system}", len(got), big+2)
	}
}

// Nodes send at different instants of the second.
func TestFlushPhase(t *testing.T) {
	a := &Agent{opts: Options{NodeName: "n1", FlushInterval: time.Second}}
	b := &Agent{opts: Options{NodeName: "n2", FlushInterval: time.Second}}
	if a.flushPhase() == b.flushPhase() {
		t.Errorf("nodes n1 and n2 send in the same instant (phase %s)", a.flushPhase())
	}
}
