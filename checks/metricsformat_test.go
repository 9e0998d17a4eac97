package checks_test

import (
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/checks"
)

func TestParseMetricsFormat(t *testing.T) {
	tests := []struct {
		in   string
		want checks.MetricsFormat
		err  string
	}{
		{"", checks.MetricsNagios, ""},
		{"nagios", checks.MetricsNagios, ""},
		{"prometheus", checks.MetricsPrometheus, ""},
		{"opentsdb", checks.MetricsOpenTSDB, ""},
		{"Prometheus", "", `"Prometheus" is not a metrics format; use one of nagios, prometheus, influx, graphite, opentsdb`},
		{"json", "", "use one of"},
	}
	for _, tt := range tests {
		got, err := checks.ParseMetricsFormat(tt.in)
		if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseMetricsFormat(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}
