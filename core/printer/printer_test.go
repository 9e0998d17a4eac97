package printer

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// now is the fixed clock the ages in the goldens are relative to.
func now() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update)
}

// load reads testdata/NAME.input.json, an API response in protojson.
func load[M proto.Message](t *testing.T, name string, m M) M {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".input.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestPrint prints every input in every format and compares the output,
// and the warnings for a separate writer, with testdata/NAME.FORMAT.golden.
func TestPrint(t *testing.T) {
	tests := []struct {
		name  string
		print func(t *testing.T, p *printer, warn io.Writer) error
	}{
		{"nodes", func(t *testing.T, p *printer, warn io.Writer) error {
			r := load(t, "nodes", &unyov1.ListNodesResponse{})
			return firstErr(p.nodes(r.GetNodes()), ClusterErrors(warn, r.GetClusterErrors()))
		}},
		{"events", func(t *testing.T, p *printer, _ io.Writer) error {
			return p.events(load(t, "events", &unyov1.ListEventsResponse{}).GetEvents())
		}},
		{"clusters", func(t *testing.T, p *printer, _ io.Writer) error {
			return p.clusters(load(t, "clusters", &unyov1.ListClustersResponse{}).GetClusters())
		}},
		{"objects", func(t *testing.T, p *printer, warn io.Writer) error {
			r := load(t, "objects", &unyov1.ListResponse{})
			return firstErr(p.objects(r.GetObjects()), ClusterErrors(warn, r.GetClusterErrors()))
		}},
		{"status", func(t *testing.T, p *printer, _ io.Writer) error {
			return p.status(load(t, "status", &unyov1.GetStatusResponse{}))
		}},
		{"plugins", func(t *testing.T, p *printer, _ io.Writer) error {
			return p.plugins([]PluginRow{
				{Cluster: "dc1", Status: &unyov1.PluginStatus{Kind: "action", Name: "exec", Version: "1.0.0", State: "running", Since: timestamppb.New(now().Add(-2 * time.Hour))}},
				{Cluster: "dc1", Node: "web-1", Status: &unyov1.PluginStatus{Kind: "check", Name: "tcp", Version: "0.3.0", State: "running", Restarts: 2, LastError: "exited: signal: killed\nmore", Since: timestamppb.New(now().Add(-90 * time.Second))}},
				{Cluster: "dc1", Node: "web-1", Status: &unyov1.PluginStatus{Kind: "check", Name: "http", State: "failed", LastError: "no executable unyo-check-http"}},
			})
		}},
		{"rollups", func(t *testing.T, p *printer, warn io.Writer) error {
			r := load(t, "rollups", &unyov1.MetricStatsResponse{})
			return firstErr(p.rollups(r.GetRollups()), ClusterErrors(warn, r.GetClusterErrors()))
		}},
		{"counts", func(t *testing.T, p *printer, _ io.Writer) error {
			r := load(t, "counts", &unyov1.CountStatsResponse{})
			return p.dailyCounts(r.GetKind(), r.GetBy(), r.GetCounts())
		}},
		{"empty", func(t *testing.T, p *printer, _ io.Writer) error {
			return firstErr(p.nodes(nil), p.objects(nil), p.events(nil), p.plugins(nil), p.rollups(nil), p.dailyCounts("logs", "app", nil))
		}},
	}
	for _, tt := range tests {
		for _, format := range []string{Table, JSON, YAML} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				var out, warn bytes.Buffer
				p, err := newPrinter(&out, format, now)
				if err != nil {
					t.Fatal(err)
				}
				if err := tt.print(t, p, &warn); err != nil {
					t.Fatal(err)
				}
				got := out.Bytes()
				if warn.Len() > 0 {
					got = append(got, "--- warnings\n"+warn.String()...)
				}
				golden(t, tt.name+"."+format+".golden", got)
			})
		}
	}
}

// TestApplyResults: apply and delete print lines, whatever the format.
func TestApplyResults(t *testing.T) {
	r := load(t, "results", &unyov1.ApplyResponse{})
	var out, warn bytes.Buffer
	if err := firstErr(ApplyResults(&out, r.GetResults()), ClusterErrors(&warn, r.GetClusterErrors())); err != nil {
		t.Fatal(err)
	}
	golden(t, "results.golden", append(out.Bytes(), "--- warnings\n"+warn.String()...))
}

// TestPublic runs the exported functions once each, on the real clock.
func TestPublic(t *testing.T) {
	var out bytes.Buffer
	n := load(t, "nodes", &unyov1.ListNodesResponse{}).GetNodes()
	e := load(t, "events", &unyov1.ListEventsResponse{}).GetEvents()
	c := load(t, "clusters", &unyov1.ListClustersResponse{}).GetClusters()
	o := load(t, "objects", &unyov1.ListResponse{}).GetObjects()
	s := load(t, "status", &unyov1.GetStatusResponse{})
	for _, format := range []string{"", Table, JSON, YAML} {
		if err := firstErr(Nodes(&out, format, n), Events(&out, format, e), Clusters(&out, format, c),
			Objects(&out, format, o), Status(&out, format, s)); err != nil {
			t.Errorf("format %q: %v", format, err)
		}
	}
	want := `unknown output format "xml" (expected table, json or yaml)`
	for _, err := range []error{CheckFormat("xml"), Nodes(&out, "xml", n), Events(&out, "xml", e),
		Clusters(&out, "xml", c), Objects(&out, "xml", o), Status(&out, "xml", s)} {
		if err == nil || err.Error() != want {
			t.Errorf("format xml: %v", err)
		}
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestObjectsYAMLApplies checks that `unyo get -o yaml` output is a valid
// manifest for the same objects.
func TestObjectsYAMLApplies(t *testing.T) {
	objs := load(t, "objects", &unyov1.ListResponse{}).GetObjects()
	var out bytes.Buffer
	if err := Objects(&out, YAML, objs); err != nil {
		t.Fatal(err)
	}
	back, err := manifest.Decode(&out, "get.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		// Server-side fields are not part of a manifest.
		c := proto.Clone(o.GetCheck()).(*unyov1.Check)
		if c.Origin == "root" { // kept by root for every cluster: applied again, it is that
			c.Cluster = ""
		}
		c.Revision, c.Source, c.Origin, c.CreatedAt, c.UpdatedAt = 0, "", "", nil, nil
		if !proto.Equal(back[i].GetCheck(), c) {
			t.Errorf("object %d: got %v, want %v", i, back[i], c)
		}
	}
}

func TestAge(t *testing.T) {
	for _, tt := range []struct {
		ago  time.Duration
		want string
	}{
		{-5 * time.Second, "0s"},
		{0, "0s"},
		{12 * time.Second, "12s"},
		{59*time.Second + 999*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{3*time.Minute + 50*time.Second, "3m"},
		{2 * time.Hour, "2h"},
		{47 * time.Hour, "47h"},
		{48 * time.Hour, "2d"},
		{4*24*time.Hour + 23*time.Hour, "4d"},
		{729 * 24 * time.Hour, "729d"},
		{3 * 365 * 24 * time.Hour, "3y"},
	} {
		if got := age(now(), timestamppb.New(now().Add(-tt.ago))); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.ago, got, tt.want)
		}
	}
	if got := age(now(), nil); got != "-" {
		t.Errorf("age(nil) = %q", got)
	}
	if got := age(now(), &timestamppb.Timestamp{}); got != "-" {
		t.Errorf("age(zero) = %q", got)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:                "-",
		-1:               "-",
		512:              "512B",
		1024:             "1KiB",
		1536:             "1.5KiB",
		10 * 1024 * 1024: "10MiB",
		8053063680:       "7.5GiB",
		17179869184:      "16GiB",
		536870912000:     "500GiB",
		2199023255552:    "2TiB",
		10*1024 - 1:      "10KiB", // not "10.0KiB"
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCells(t *testing.T) {
	if got := truncate(strings.Repeat("é", 70), 60); len([]rune(got)) != 60 || !strings.HasSuffix(got, "...") {
		t.Errorf("truncate = %q", got)
	}
	if got := firstLine("  OK - fine\nperf | a=1\n"); got != "OK - fine" {
		t.Errorf("firstLine = %q", got)
	}
	if got := clean("a\tb\x1bc"); got != "a b c" {
		t.Errorf("clean = %q", got)
	}
}

// TestObjectsTableByKind: kinds without their own columns get a generic
// table, after a blank line.
func TestObjectsTableByKind(t *testing.T) {
	objs := []*unyov1.Object{
		{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "disk", Spec: &unyov1.CheckSpec{Interval: "1m", Command: []string{"check_disk"}}, Revision: 2}}},
		{}, // a kind this build does not know
	}
	var out bytes.Buffer
	if err := Objects(&out, Table, objs); err != nil {
		t.Fatal(err)
	}
	want := "NAME   CLUSTER   SCHEDULE   COMMAND      SELECTOR   REVISION   ORIGIN\n" +
		"disk   -         1m         check_disk   <all>      2          -\n" +
		"\n" +
		"KIND   NAME   CLUSTER\n" +
		"-             -\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if err := Objects(&out, JSON, objs); err == nil {
		t.Errorf("JSON of an object without kind: no error")
	}
}

// TestDocumentsOfRootObjects: the clusters' copies of an object root keeps
// for every cluster print as one document without a cluster; a cluster's
// own object keeps its cluster.
func TestDocumentsOfRootObjects(t *testing.T) {
	check := func(cluster, origin, interval string) *unyov1.Object {
		return &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "load", Cluster: cluster, Origin: origin,
			Spec: &unyov1.CheckSpec{Command: []string{"check_load"}, Interval: interval}}}}
	}
	var out bytes.Buffer
	if err := Objects(&out, YAML, []*unyov1.Object{check("a", "root", "1m"), check("b", "root", "1m"), check("c", "", "5m")}); err != nil {
		t.Fatal(err)
	}
	want := "kind: Check\nname: load\nspec:\n  command:\n    - check_load\n  interval: 1m\n---\nkind: Check\nname: load\ncluster: c\nspec:\n  command:\n    - check_load\n  interval: 5m\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// An empty table from an answer some clusters did not give must not claim
// that nothing exists; json and yaml stay the same for scripts.
func TestPartialEmptyList(t *testing.T) {
	for _, tc := range []struct {
		partial bool
		format  string
		want    string
	}{
		{false, Table, "No nodes found.\n"},
		{true, Table, "No nodes found in the clusters that answered.\n"},
		{true, JSON, "{\n  \"items\": []\n}\n"},
	} {
		var b strings.Builder
		if err := Nodes(Partial(&b, tc.partial), tc.format, nil); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("partial=%v -o %s: %q, want %q", tc.partial, tc.format, b.String(), tc.want)
		}
	}
}
