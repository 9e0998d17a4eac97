package convert_test

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/plugins/host"
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

func TestTime(t *testing.T) {
	if got := convert.Time(nil); !got.IsZero() {
		t.Errorf("Time(nil) = %v, want zero", got)
	}
	if got := convert.Time(timestamppb.New(t0)); !got.Equal(t0) {
		t.Errorf("Time = %v, want %v", got, t0)
	}
}

func TestBucketsRoundTrip(t *testing.T) {
	in := []logstore.Bucket{{Start: t0, Key: "web", Count: 5, Errors: 2, Warnings: 1}, {Start: t0.Add(time.Hour), Count: 1}}
	if got := convert.BucketsFromProto(convert.BucketsToProto(in)); !reflect.DeepEqual(got, in) {
		t.Errorf("round trip = %+v, want %+v", got, in)
	}
}

func TestQueryFromProto(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *unyov1.LogFilter
		want logstore.Query
	}{
		{"nil", nil, logstore.Query{}},
		{"all", &unyov1.LogFilter{Since: timestamppb.New(t0), Host: "h", App: "a", TraceId: "t", Levels: []string{"error"}, Grep: "x", Limit: 7},
			logstore.Query{Since: t0, Host: "h", App: "a", TraceID: "t", Levels: []string{"error"}, Grep: "x", Limit: 7}},
	} {
		if got := convert.QueryFromProto(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// An agent names neither the host nor the cluster of its lines: the cluster
// sets both.
func TestEntryFromProtoSetsHostAndCluster(t *testing.T) {
	e := convert.EntryFromProto(&unyov1.LogEntry{Time: timestamppb.New(t0), Host: "other", Cluster: "other", App: "a", Message: "m"}, "web1", "eu")
	want := logstore.Entry{Time: t0, Host: "web1", Cluster: "eu", App: "a", Message: "m"}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("%+v, want %+v", e, want)
	}
	got := convert.EntriesToProto([]logstore.Entry{e})
	if len(got) != 1 || got[0].GetHost() != "web1" || got[0].GetCluster() != "eu" || !got[0].GetTime().AsTime().Equal(t0) {
		t.Errorf("EntriesToProto = %v", got)
	}
}

func TestSeriesToProto(t *testing.T) {
	got := convert.SeriesToProto([]tsdb.Series{{Labels: map[string]string{"__name__": "up"}, Points: []tsdb.Point{{T: t0, V: 1}}}})
	want := []*unyov1.Series{{Labels: map[string]string{"__name__": "up"}, Points: []*unyov1.Point{{TimeMs: t0.UnixMilli(), Value: 1}}}}
	if len(got) != 1 || !proto.Equal(got[0], want[0]) {
		t.Errorf("%v, want %v", got, want)
	}
}

func TestPluginStatuses(t *testing.T) {
	if got := convert.PluginStatuses(nil); got != nil {
		t.Errorf("no statuses = %v, want nil", got)
	}
	got := convert.PluginStatuses([]host.Status{
		{Kind: "check", Name: "tcp", Version: "1.0", State: "running", Restarts: 2, LastError: "boom", Since: t0},
		{Kind: "action", Name: "smtp"},
	})
	want := []*unyov1.PluginStatus{
		{Kind: "check", Name: "tcp", Version: "1.0", State: "running", Restarts: 2, LastError: "boom", Since: timestamppb.New(t0)},
		{Kind: "action", Name: "smtp"},
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
