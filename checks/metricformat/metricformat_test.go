package metricformat_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/checks/metricformat"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// runTime is the time of the runs in the fixtures, a minute after the
// timestamps they print.
var runTime = time.UnixMilli(1700000060000)

const runMs = 1700000060000

func l(kv ...string) []tsdb.Label {
	var out []tsdb.Label
	for i := 0; i < len(kv); i += 2 {
		out = append(out, tsdb.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file        string
		format      checks.MetricsFormat
		message     string
		samples     int
		first       metricformat.Sample // the first sample
		badLines    []int
		badReason   string // of the first bad line
		outOfWindow int
		report      string // in the long output
	}{
		{
			file: "prometheus_ok.txt", format: checks.MetricsPrometheus, message: "OK - 2 queues checked", samples: 4,
			first:       metricformat.Sample{Name: "rabbitmq_queue_messages", Labels: l("check", "mq", "queue", "orders", "vhost", "/"), TimeMs: runMs, Value: 12},
			outOfWindow: 1, report: "unyo: 4 samples (prometheus)",
		},
		{
			file: "prometheus_malformed.txt", format: checks.MetricsPrometheus, samples: 3,
			first:    metricformat.Sample{Name: "http_requests_total", Labels: l("check", "mq", "code", "200", "method", "get"), TimeMs: runMs, Value: 1027},
			badLines: []int{4, 5, 7}, badReason: "missing closing double quote",
			report: `unyo: 3 malformed prometheus lines ignored: line 4 "http_requests_total{code=\"500\",method=\"get} 3": cannot unmarshal tags`,
		},
		{
			file: "influx_ok.txt", format: checks.MetricsInflux, samples: 5,
			first: metricformat.Sample{Name: "cpu_usage_idle", Labels: l("check", "mq", "cpu", "cpu-total", "host", "web1"), TimeMs: 1700000000000, Value: 97.5},
		},
		{
			file: "influx_malformed.txt", format: checks.MetricsInflux, message: "OK - 3 of 4 inputs read", samples: 2,
			first:    metricformat.Sample{Name: "cpu_usage_idle", Labels: l("check", "mq", "host", "web1"), TimeMs: runMs, Value: 97.5},
			badLines: []int{3, 4, 5}, badReason: "cannot find Whitespace",
		},
		{
			file: "graphite_ok.txt", format: checks.MetricsGraphite, samples: 3,
			first: metricformat.Sample{Name: "servers_web1_load_1m", Labels: l("check", "mq"), TimeMs: 1700000000000, Value: 0.42},
		},
		{
			file: "graphite_malformed.txt", format: checks.MetricsGraphite, message: "WARNING - backup is 26h old", samples: 2,
			first:    metricformat.Sample{Name: "backup_age_seconds", Labels: l("check", "mq"), TimeMs: 1700000000000, Value: 93600},
			badLines: []int{3, 4, 6}, badReason: `value "twelve" is not a number`, outOfWindow: 1,
			report: "unyo: 1 samples printed a time more than 24h old or 24h ahead; they take the run's time",
		},
		{
			file: "opentsdb_ok.txt", format: checks.MetricsOpenTSDB, samples: 3,
			first: metricformat.Sample{Name: "sys_cpu_user", Labels: l("check", "mq", "cpu", "0", "host", "web1"), TimeMs: 1700000000000, Value: 42.5},
		},
		{
			file: "opentsdb_malformed.txt", format: checks.MetricsOpenTSDB, message: "CRITICAL - 1 of 2 exporters down", samples: 2,
			first:    metricformat.Sample{Name: "sys_cpu_user", Labels: l("check", "mq", "host", "web1"), TimeMs: 1700000000000, Value: 42.5},
			badLines: []int{3, 4, 5}, badReason: "want put METRIC TIMESTAMP VALUE",
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			r := metricformat.Parse(tt.format, string(out), metricformat.Options{Check: "mq", RunTime: runTime})
			if r.Message != tt.message {
				t.Errorf("Message = %q, want %q", r.Message, tt.message)
			}
			if len(r.Samples) != tt.samples {
				t.Fatalf("%d samples, want %d: %+v", len(r.Samples), tt.samples, r.Samples)
			}
			if !reflect.DeepEqual(r.Samples[0], tt.first) {
				t.Errorf("first sample = %+v, want %+v", r.Samples[0], tt.first)
			}
			var lines []int
			for _, b := range r.Bad {
				lines = append(lines, b.Line)
			}
			if r.BadCount != len(tt.badLines) || !reflect.DeepEqual(lines, tt.badLines) {
				t.Errorf("bad lines %v (count %d), want %v", lines, r.BadCount, tt.badLines)
			}
			if tt.badReason != "" && (len(r.Bad) == 0 || !strings.Contains(r.Bad[0].Reason, tt.badReason)) {
				t.Errorf("first bad line %+v, want a reason with %q", r.Bad, tt.badReason)
			}
			if r.OutOfWindow != tt.outOfWindow {
				t.Errorf("OutOfWindow = %d, want %d", r.OutOfWindow, tt.outOfWindow)
			}
			msg, long := r.Report(tt.format, false)
			if want := tt.message; want != "" && msg != want {
				t.Errorf("report message %q, want %q", msg, want)
			}
			if tt.report != "" && !strings.Contains(strings.Join(long, "\n"), tt.report) {
				t.Errorf("report %q does not say %q", long, tt.report)
			}
		})
	}
}

func TestParseEdges(t *testing.T) {
	many := make([]string, 0, tsdb.MaxLabels+1)
	for i := range tsdb.MaxLabels + 1 {
		many = append(many, "l"+strings.Repeat("x", i)+`="v"`)
	}
	// A check printing a million lines (4 MB, just under MaxOutput).
	million := strings.Repeat("m 1\n", 1_000_000)
	tests := []struct {
		name      string
		format    checks.MetricsFormat
		output    string
		truncated bool
		message   string
		samples   int
		unread    int
		bad       int
		check     func(t *testing.T, r metricformat.Result)
		report    string
	}{
		{name: "empty", format: checks.MetricsPrometheus, output: "", message: "", report: ""},
		{name: "comments only", format: checks.MetricsPrometheus, output: "# HELP x y\n# TYPE x gauge\n\n"},
		{name: "status line only", format: checks.MetricsInflux, output: "UNKNOWN - cannot reach the broker\n", message: "UNKNOWN - cannot reach the broker"},
		{
			name: "a later non-metric line is malformed", format: checks.MetricsPrometheus, output: "up 1\nall good\n", samples: 1, bad: 1,
		},
		{
			name: "a million lines", format: checks.MetricsPrometheus, output: million,
			samples: metricformat.MaxSamples, unread: 1_000_000 - metricformat.MaxSamples,
			report: "unyo: stopped at 20000 samples, the most kept per run; 980000 more lines not read",
		},
		{
			name: "the fields of a line past the limit", format: checks.MetricsInflux,
			output:  strings.Repeat("m a=1\n", metricformat.MaxSamples-1) + "m a=1,b=2\nm a=3\n",
			samples: metricformat.MaxSamples, unread: 2,
		},
		{
			name: "too many labels is refused, also on the first line", format: checks.MetricsPrometheus,
			output: "m{" + strings.Join(many, ",") + "} 1\nm 2\n", samples: 1, bad: 1,
			check: func(t *testing.T, r metricformat.Result) {
				if !strings.Contains(r.Bad[0].Reason, "labels, at most") || !strings.HasSuffix(r.Bad[0].Text, "…") {
					t.Errorf("bad line %+v: want the label limit named and the line shortened", r.Bad[0])
				}
			},
		},
		{
			name: "the cut last line of a truncated output is not read", format: checks.MetricsGraphite,
			output: "a 1\nb 2\nc 3", truncated: true, samples: 2, report: "unyo: output cut at 4 MiB",
		},
		{
			name: "node and check tags are kept renamed", format: checks.MetricsOpenTSDB,
			output: "put m 1700000000 1 node=a check=b\n", samples: 1,
			check: func(t *testing.T, r metricformat.Result) {
				if want := l("check", "c", "exported_check", "b", "exported_node", "a"); !reflect.DeepEqual(r.Samples[0].Labels, want) {
					t.Errorf("labels %v, want %v", r.Samples[0].Labels, want)
				}
			},
		},
		{
			name: "names become valid metric and label names", format: checks.MetricsInflux,
			output: "9disk.io,dev-name=sda read.bytes=1\n", samples: 1,
			check: func(t *testing.T, r metricformat.Result) {
				if s := r.Samples[0]; s.Name != "_9disk_io_read_bytes" || !reflect.DeepEqual(s.Labels, l("check", "c", "dev_name", "sda")) {
					t.Errorf("sample %+v, want _9disk_io_read_bytes{dev_name=sda}", s)
				}
			},
		},
		{
			name: "future timestamps take the run time", format: checks.MetricsPrometheus,
			output: "m 1 1800000000000\n", samples: 1,
			check: func(t *testing.T, r metricformat.Result) {
				if r.Samples[0].TimeMs != runMs || r.OutOfWindow != 1 {
					t.Errorf("sample at %d (%d out of window), want the run time", r.Samples[0].TimeMs, r.OutOfWindow)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := metricformat.Parse(tt.format, tt.output, metricformat.Options{Check: "c", RunTime: runTime, Truncated: tt.truncated})
			if r.Message != tt.message || len(r.Samples) != tt.samples || r.Unread != tt.unread || r.BadCount != tt.bad {
				t.Fatalf("message %q, %d samples, %d unread, %d bad (%+v); want %q, %d, %d, %d",
					r.Message, len(r.Samples), r.Unread, r.BadCount, r.Bad, tt.message, tt.samples, tt.unread, tt.bad)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
			msg, long := r.Report(tt.format, tt.truncated)
			if tt.message == "" && !strings.HasSuffix(msg, " samples ("+string(tt.format)+")") {
				t.Errorf("report message %q, want a summary", msg)
			}
			if tt.report != "" && !strings.Contains(strings.Join(long, "\n"), tt.report) {
				t.Errorf("report %q does not say %q", long, tt.report)
			}
		})
	}
}
