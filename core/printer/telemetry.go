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
