package printer

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Series prints query results: in a table one row per point, the series'
// labels ({__name__} first, as Prometheus writes them), time and value.
func Series(w io.Writer, format string, series []*unyov1.Series) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "series", series, func() table {
		t := table{header: []string{"SERIES", "TIME", "VALUE"}}
		for _, s := range series {
			name := seriesName(s.GetLabels())
			for _, pt := range s.GetPoints() {
				t.add(name, time.UnixMilli(pt.GetTimeMs()).UTC().Format(time.RFC3339), strconv.FormatFloat(pt.GetValue(), 'g', -1, 64))
			}
		}
		return t
	})
}

// SeriesLabels prints the label sets of matching series, one per row.
func SeriesLabels(w io.Writer, format string, series []*unyov1.SeriesLabels) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "series", series, func() table {
		t := table{header: []string{"SERIES"}}
		for _, s := range series {
			t.add(seriesName(s.GetLabels()))
		}
		return t
	})
}

// seriesName writes name{a="1", b="2"} with labels sorted.
func seriesName(l map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		if k != "__name__" {
			parts = append(parts, fmt.Sprintf("%s=%q", k, l[k]))
		}
	}
	return l["__name__"] + "{" + strings.Join(parts, ", ") + "}"
}

// LogEntries prints log lines: in a table TIME, HOST, APP, LEVEL, MESSAGE.
func LogEntries(w io.Writer, format string, entries []*unyov1.LogEntry) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "log lines", entries, func() table {
		t := table{header: []string{"TIME", "HOST", "APP", "LEVEL", "MESSAGE"}}
		for _, e := range entries {
			t.add(e.GetTime().AsTime().UTC().Format(time.RFC3339Nano), orDash(e.GetHost()), orDash(e.GetApp()),
				orDash(e.GetLevel()), clean(e.GetMessage()))
		}
		return t
	})
}

// LogBuckets prints stats: in a table START, the grouping key, COUNT,
// ERRORS and WARNINGS.
func LogBuckets(w io.Writer, format, by string, buckets []*unyov1.LogBucket) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "log lines", buckets, func() table {
		t := table{header: []string{"START", strings.ToUpper(by), "COUNT", "ERRORS", "WARNINGS"}}
		for _, b := range buckets {
			t.add(b.GetStart().AsTime().UTC().Format(time.RFC3339), orDash(b.GetKey()), strconv.FormatInt(b.GetCount(), 10),
				strconv.FormatInt(b.GetErrors(), 10), strconv.FormatInt(b.GetWarnings(), 10))
		}
		return t
	})
}

// Rollups prints statistics of series: in a table the cluster, series,
// bucket start, min, max, avg, last and the number of samples.
func Rollups(w io.Writer, format string, rollups []*unyov1.Rollup) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.rollups(rollups)
}

func (p *printer) rollups(rollups []*unyov1.Rollup) error {
	return printList(p, "rollups", rollups, func() table {
		t := table{header: []string{"CLUSTER", "SERIES", "START", "RES", "MIN", "MAX", "AVG", "LAST", "SAMPLES"}}
		for _, r := range rollups {
			t.add(r.GetCluster(), seriesName(r.GetLabels()), r.GetStart().AsTime().UTC().Format(time.RFC3339), r.GetResolution(),
				num(r.GetMin()), num(r.GetMax()), num(r.GetAvg()), num(r.GetLast()), strconv.FormatInt(r.GetCount(), 10))
		}
		return t
	})
}

// DailyCounts prints daily counts: in a table the day, cluster, key, count
// and the error and warning rates.
func DailyCounts(w io.Writer, format, kind, by string, counts []*unyov1.DailyCount) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.dailyCounts(kind, by, counts)
}

func (p *printer) dailyCounts(kind, by string, counts []*unyov1.DailyCount) error {
	// Events are counted by check and node under the names app and host.
	col := strings.ToUpper(by)
	if kind == "events" {
		col = map[string]string{"app": "CHECK", "host": "NODE"}[by]
		if col == "" {
			col = strings.ToUpper(by)
		}
	}
	return printList(p, "daily counts of "+kind, counts, func() table {
		t := table{header: []string{"DAY", "CLUSTER", col, "COUNT", "ERRORS", "ERROR%", "WARNINGS", "WARNING%"}}
		for _, c := range counts {
			t.add(c.GetDay().AsTime().UTC().Format(time.DateOnly), c.GetCluster(), orDash(c.GetKey()), strconv.FormatInt(c.GetCount(), 10),
				strconv.FormatInt(c.GetErrors(), 10), percent(c.GetErrors(), c.GetCount()),
				strconv.FormatInt(c.GetWarnings(), 10), percent(c.GetWarnings(), c.GetCount()))
		}
		return t
	})
}

// num prints a statistic compactly: at most 6 significant digits.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func percent(n, total int64) string {
	if total == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(n)/float64(total), 'f', 1, 64)
}
