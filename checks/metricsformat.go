package checks

import (
	"fmt"
	"slices"
	"strings"
)

// MetricsFormat is how a command check prints its metrics: spec.metrics_format.
// checks/metricformat parses all but MetricsNagios.
type MetricsFormat string

// The formats. Nagios (the default) is `TEXT | PERFDATA`, handled by
// checks/nagios; checks/metricformat parses the others.
const (
	MetricsNagios     MetricsFormat = "nagios"
	MetricsPrometheus MetricsFormat = "prometheus"
	MetricsInflux     MetricsFormat = "influx"
	MetricsGraphite   MetricsFormat = "graphite"
	MetricsOpenTSDB   MetricsFormat = "opentsdb"
)

// MetricsFormats lists every format, the default first.
var MetricsFormats = []MetricsFormat{MetricsNagios, MetricsPrometheus, MetricsInflux, MetricsGraphite, MetricsOpenTSDB}

// ParseMetricsFormat reads a format name; empty means MetricsNagios.
func ParseMetricsFormat(s string) (MetricsFormat, error) {
	if s == "" {
		return MetricsNagios, nil
	}
	if f := MetricsFormat(s); slices.Contains(MetricsFormats, f) {
		return f, nil
	}
	names := make([]string, len(MetricsFormats))
	for i, f := range MetricsFormats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("%q is not a metrics format; use one of %s", s, strings.Join(names, ", "))
}
