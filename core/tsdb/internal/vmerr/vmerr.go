// Package vmerr recognises VictoriaMetrics' result-size limit errors, which
// both backends receive as plain text (in-process errors or HTTP bodies).
package vmerr

import (
	"errors"
	"strings"

	"github.com/unyo-ops/unyo/core/tsdb"
)

// limits maps a fragment of VictoriaMetrics' error text to the limit's name
// as an operator would look it up. The texts are stable across releases
// (checked on 1.79.5 and 1.150.0) because they quote the flag names.
var limits = []struct{ fragment, limit string }{
	{"the number of matching timeseries exceeds", "max series per query (-search.maxUniqueTimeseries)"},
	{"-search.maxUniqueTimeseries", "max series per query (-search.maxUniqueTimeseries)"},
	{"-search.maxResponseSeries", "max response series (-search.maxResponseSeries)"},
	{"-search.maxSeries", "max series (-search.maxSeries)"},
	{"-search.maxPointsPerTimeseries", "max points per series (-search.maxPointsPerTimeseries)"},
	{"too many points for the given start", "max points per series (-search.maxPointsPerTimeseries)"},
	{"-search.maxPointsSubqueryPerTimeseries", "max points per subquery series (-search.maxPointsSubqueryPerTimeseries)"},
	{"-search.maxMemoryPerQuery", "max memory per query (-search.maxMemoryPerQuery)"},
	{"-search.maxSamplesPerQuery", "max samples per query (-search.maxSamplesPerQuery)"},
	{"-search.maxSamplesPerSeries", "max samples per series (-search.maxSamplesPerSeries)"},
	{"-search.maxSeriesPerAggrFunc", "max series per aggregate function (-search.maxSeriesPerAggrFunc)"},
	{"cannot allocate", "max memory per query (-memory.allowedPercent)"},
}

// Classify wraps err as tsdb.ErrTooLarge when its text names a result-size
// limit, and returns err unchanged otherwise.
func Classify(err error) error {
	if err == nil || errors.Is(err, tsdb.ErrTooLarge) {
		return err
	}
	msg := err.Error()
	for _, l := range limits {
		if strings.Contains(msg, l.fragment) {
			return tsdb.TooLarge(l.limit, err)
		}
	}
	return err
}
