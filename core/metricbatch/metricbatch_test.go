package metricbatch_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/tsdb"
)

var node = tsdb.Label{Name: "node", Value: "web1"}

// valuesTag is the tag of MetricBatch.values, packed.
const valuesTag = 5<<3 | 2

func l(kv ...string) []tsdb.Label {
	var out []tsdb.Label
	for i := 0; i < len(kv); i += 2 {
		out = append(out, tsdb.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// roundTrip reads spool records back, sends them in a request and decodes
// them the way the cluster does.
func roundTrip(t *testing.T, records [][]byte) []tsdb.SeriesPoints {
	t.Helper()
	batches, bad, err := metricbatch.DecodeRecords(records, 1000)
	if bad != 0 {
		t.Fatalf("DecodeRecords: %d bad records: %v", bad, err)
	}
	req := &unyov1.WriteMetricsRequest{Node: "web1"}
	metricbatch.SetBatches(req, batches)
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got unyov1.WriteMetricsRequest
	if err := proto.Unmarshal(wire, &got); err != nil {
		t.Fatal(err)
	}
	if got.GetNode() != "web1" || len(got.GetBatches()) != len(batches) {
		t.Fatalf("request decoded as node %q with %d batches, want web1 with %d", got.GetNode(), len(got.GetBatches()), len(batches))
	}
	var out []tsdb.SeriesPoints
	for i, b := range got.GetBatches() {
		if n := metricbatch.Points(b); n != batches[i].Points {
			t.Errorf("batch %d: %d points sent, DecodeRecords counted %d", i, n, batches[i].Points)
		}
		if out, err = metricbatch.Series(out, b, node); err != nil {
			t.Fatalf("Series: %v", err)
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *metricbatch.Builder)
		want  []tsdb.SeriesPoints
	}{
		{
			name: "one collection",
			build: func(b *metricbatch.Builder) {
				b.Add("node_load1", nil, 1700000000000, 0.5)
				b.Add("node_cpu", l("mode", "user", "cpu", "0"), 1700000000000, 12)
				b.Add("node_cpu", l("cpu", "1", "mode", "user"), 1700000000000, 13)
			},
			want: []tsdb.SeriesPoints{
				{Name: "node_load1", Labels: l("node", "web1"), TimesMs: []int64{1700000000000}, Values: []float64{0.5}},
				{Name: "node_cpu", Labels: l("cpu", "0", "mode", "user", "node", "web1"), TimesMs: []int64{1700000000000}, Values: []float64{12}},
				{Name: "node_cpu", Labels: l("cpu", "1", "mode", "user", "node", "web1"), TimesMs: []int64{1700000000000}, Values: []float64{13}},
			},
		},
		{
			name: "consecutive points of a series join it, times go back between series",
			build: func(b *metricbatch.Builder) {
				b.Add("a", l("x", "1", "y", "2"), 100, 1)
				b.Add("a", l("y", "2", "x", "1"), 200, 2)
				b.Add("a", l("x", "1", "y", "2"), 300, 3)
				b.Add("a", l("x", "2", "y", "2"), 50, 4)
				b.Add("b", l("x", "2", "y", "2"), 50, 5)
				b.Add("b", l("x", "2"), 60, 6)
				b.Add("a", l("x", "1", "y", "2"), 400, 7)
			},
			want: []tsdb.SeriesPoints{
				{Name: "a", Labels: l("node", "web1", "x", "1", "y", "2"), TimesMs: []int64{100, 200, 300}, Values: []float64{1, 2, 3}},
				{Name: "a", Labels: l("node", "web1", "x", "2", "y", "2"), TimesMs: []int64{50}, Values: []float64{4}},
				{Name: "b", Labels: l("node", "web1", "x", "2", "y", "2"), TimesMs: []int64{50}, Values: []float64{5}},
				{Name: "b", Labels: l("node", "web1", "x", "2"), TimesMs: []int64{60}, Values: []float64{6}},
				{Name: "a", Labels: l("node", "web1", "x", "1", "y", "2"), TimesMs: []int64{400}, Values: []float64{7}},
			},
		},
		{
			name: "invalid UTF-8 is replaced",
			build: func(b *metricbatch.Builder) {
				b.Add("m", l("dev", "sd\xffa"), 5, 1)
				b.Add("m", l("dev", "sd\xffa"), 6, 2)
			},
			want: []tsdb.SeriesPoints{{Name: "m", Labels: l("dev", "sd\uFFFDa", "node", "web1"), TimesMs: []int64{5, 6}, Values: []float64{1, 2}}},
		},
		{
			name: "the cluster's node label replaces the agent's",
			build: func(b *metricbatch.Builder) {
				b.Add("m", l("node", "other", "a", "1", "z", "2"), 5, 1)
			},
			want: []tsdb.SeriesPoints{{Name: "m", Labels: l("a", "1", "node", "web1", "z", "2"), TimesMs: []int64{5}, Values: []float64{1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b metricbatch.Builder
			tt.build(&b)
			rec, err := metricbatch.AppendRecord(nil, b.Take())
			if err != nil {
				t.Fatal(err)
			}
			if got := roundTrip(t, [][]byte{rec}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if b.Points() != 0 || b.Take() != nil {
				t.Errorf("Take did not start a new batch")
			}
		})
	}
}

// TestLegacyRecords: a spool written by an agent before MetricBatch holds
// one Sample per record; they are still delivered, beside new records.
func TestLegacyRecords(t *testing.T) {
	var records [][]byte
	for i, s := range []*unyov1.Sample{
		{Name: "old", Labels: map[string]string{"b": "2", "a": "1"}, TimeMs: 1000, Value: 1},
		{Name: "old", TimeMs: 2000, Value: 2},
	} {
		rec, err := proto.Marshal(s)
		if err != nil {
			t.Fatal(i, err)
		}
		records = append(records, rec)
	}
	var b metricbatch.Builder
	b.Add("new", nil, 3000, 3)
	rec, err := metricbatch.AppendRecord(nil, b.Take())
	if err != nil {
		t.Fatal(err)
	}
	records = append(records, rec)
	got := roundTrip(t, records)
	want := []tsdb.SeriesPoints{
		{Name: "new", Labels: l("node", "web1"), TimesMs: []int64{3000}, Values: []float64{3}},
		{Name: "old", Labels: l("a", "1", "b", "2", "node", "web1"), TimesMs: []int64{1000}, Values: []float64{1}},
		{Name: "old", Labels: l("node", "web1"), TimesMs: []int64{2000}, Values: []float64{2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// Many legacy records are gathered into batches of at most maxPoints.
	batches, bad, err := metricbatch.DecodeRecords([][]byte{records[0], records[1], records[0]}, 2)
	if bad != 0 || err != nil || len(batches) != 2 || batches[0].Points != 2 || batches[1].Points != 1 {
		t.Errorf("DecodeRecords(3 legacy, max 2) = %d batches, %d bad, %v; want batches of 2 and 1 points", len(batches), bad, err)
	}
}

func TestUnreadableRecordsSkipped(t *testing.T) {
	var b metricbatch.Builder
	b.Add("m", nil, 1, 1)
	good, err := metricbatch.AppendRecord(nil, b.Take())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rec  []byte
		want string
	}{
		{"truncated batch", good[:len(good)-3], "spooled metric batch 1 of 2"},
		{"values not whole doubles", []byte{0, valuesTag, 3, 1, 2, 3}, "not a multiple of 8"},
		{"garbage legacy", []byte{0xff, 0xff, 0xff}, "spooled sample 1 of 2 (older agent's format)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batches, bad, err := metricbatch.DecodeRecords([][]byte{tt.rec, good}, 100)
			if bad != 1 || err == nil || !strings.Contains(err.Error(), tt.want) || len(batches) != 1 {
				t.Errorf("DecodeRecords = %d batches, %d bad, %v; want the good one, 1 bad naming %q", len(batches), bad, err, tt.want)
			}
		})
	}
}

func TestMalformedBatches(t *testing.T) {
	strs := []string{"m", "a", "1"}
	tests := []struct {
		name string
		b    *unyov1.MetricBatch
		want string
	}{
		{"times and values differ", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 0}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}}, "1 times but 0 values"},
		{"string out of range", &unyov1.MetricBatch{Strings: strs, Series: []uint32{7, 0}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "refers to string 7 of 3"},
		{"label string out of range", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 1, 1, 9}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "refers to string 9 of 3"},
		{"series list ends early", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "ends early"},
		{"labels run past the list", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 2, 1, 2}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "run past"},
		{"too many labels", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 1000}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "1000 labels, at most"},
		{"no points", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 0}, PointCounts: []uint32{0}}, "0 points"},
		{"more points than sent", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 0}, PointCounts: []uint32{2}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "2 points, 1 of 1 left"},
		{"points left over", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 0}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1, 1}, Values: []float64{1, 1}}, "1 of 2 points"},
		{"series entries left over", &unyov1.MetricBatch{Strings: strs, Series: []uint32{0, 0, 0}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}, "2 of 3 series entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := metricbatch.Series(nil, tt.b, node)
			if !errors.Is(err, metricbatch.ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Series = %v, want ErrMalformed saying %q", err, tt.want)
			}
		})
	}
}

// TestSeriesDefaults: a default label is added where a series has none of
// its name, in name order, and a series' own is kept; the set label still
// replaces.
func TestSeriesDefaults(t *testing.T) {
	var b metricbatch.Builder
	b.Add("node_load1", nil, 1000, 1)
	b.Add("mq_depth", l("instance", "mq:9090", "node", "spoofed", "queue", "a"), 1000, 2)
	rec, err := metricbatch.AppendRecord(nil, b.Take())
	if err != nil {
		t.Fatal(err)
	}
	batches, bad, err := metricbatch.DecodeRecords([][]byte{rec}, 1000)
	if bad != 0 || len(batches) != 1 {
		t.Fatalf("DecodeRecords: %d batches, %d bad: %v", len(batches), bad, err)
	}
	var batch unyov1.MetricBatch
	if err := proto.Unmarshal(batches[0].Raw, &batch); err != nil {
		t.Fatal(err)
	}
	instance := func(string) tsdb.Label { return tsdb.Label{Name: "instance", Value: "web1"} }
	job := func(name string) tsdb.Label {
		if strings.HasPrefix(name, "node_") {
			return tsdb.Label{Name: "job", Value: "node"}
		}
		return tsdb.Label{Name: "job", Value: "unyo"}
	}
	got, err := metricbatch.Series(nil, &batch, node, instance, job)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]tsdb.Label{
		l("instance", "web1", "job", "node", "node", "web1"),
		l("instance", "mq:9090", "job", "unyo", "node", "web1", "queue", "a"),
	}
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i].Labels, want[i]) {
			t.Errorf("series %s: labels %v, want %v", got[i].Name, got[i].Labels, want[i])
		}
	}
}
