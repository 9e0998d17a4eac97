package tsdb

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// MaxLabels is the maximum number of labels per sample, excluding the
	// name: the lower of VictoriaMetrics' -maxLabelsPerTimeseries defaults
	// (30 in 1.79, 40 in 1.150). Above it a server drops labels or whole
	// series silently; rejecting keeps both backends alike and loud.
	MaxLabels = 30
	// MaxLabelValueLen is the maximum length of a label value in bytes,
	// VictoriaMetrics 1.150's default -maxLabelValueLen (longer values are
	// ignored or truncated by servers).
	MaxLabelValueLen = 4096
	// MaxNameLen bounds metric and label names (-maxLabelNameLen).
	MaxNameLen = 256
	// MaxFutureSkew is how far ahead of now a timestamp may be before the
	// sample is dropped: beyond it is a broken clock, not data.
	MaxFutureSkew = 24 * time.Hour
)

// InvalidSampleError rejects a batch because of one bad sample.
type InvalidSampleError struct {
	Index  int    // position in the batch
	Sample string // the sample's series, e.g. `cpu{host="a"}`
	Reason string
}

func (e *InvalidSampleError) Error() string {
	return fmt.Sprintf("invalid sample #%d %s: %s", e.Index, e.Sample, e.Reason)
}

// ValidateSample checks a sample's metric name and labels against the
// Prometheus data model. index is only used in the error.
func ValidateSample(index int, s *Sample) error {
	if reason := checkSample(s); reason != "" {
		return &InvalidSampleError{Index: index, Sample: SeriesString(s.Name, s.Labels), Reason: reason}
	}
	return nil
}

func checkSample(s *Sample) string {
	if reason := checkHead(s.Name, len(s.Labels)); reason != "" {
		return reason
	}
	for k, v := range s.Labels {
		if reason := checkLabel(k, v); reason != "" {
			return reason
		}
	}
	return ""
}

// ValidateSeries checks a series like ValidateSample, and also that its
// labels are sorted by name without duplicates and that it has as many
// values as times. index is only used in the error.
func ValidateSeries(index int, s *SeriesPoints) error {
	if reason := checkSeries(s); reason != "" {
		return &InvalidSampleError{Index: index, Sample: LabelsString(s.Name, s.Labels), Reason: reason}
	}
	return nil
}

func checkSeries(s *SeriesPoints) string {
	if reason := checkHead(s.Name, len(s.Labels)); reason != "" {
		return reason
	}
	for i, l := range s.Labels {
		if reason := checkLabel(l.Name, l.Value); reason != "" {
			return reason
		}
		if i > 0 && l.Name <= s.Labels[i-1].Name {
			return fmt.Sprintf("labels must be sorted by name without duplicates, %q follows %q", l.Name, s.Labels[i-1].Name)
		}
	}
	if len(s.TimesMs) != len(s.Values) {
		return fmt.Sprintf("%d times but %d values", len(s.TimesMs), len(s.Values))
	}
	return ""
}

// checkHead checks a series' metric name and number of labels.
func checkHead(name string, labels int) string {
	if !validMetricName(name) {
		return fmt.Sprintf("metric name %q must match [a-zA-Z_:][a-zA-Z0-9_:]* and be at most %d bytes", name, MaxNameLen)
	}
	if labels > MaxLabels {
		return fmt.Sprintf("%d labels, at most %d are allowed", labels, MaxLabels)
	}
	return ""
}

func checkLabel(k, v string) string {
	if !validLabelName(k) {
		return fmt.Sprintf("label name %q must match [a-zA-Z_][a-zA-Z0-9_]* and be at most %d bytes", k, MaxNameLen)
	}
	if strings.HasPrefix(k, "__") {
		return fmt.Sprintf("label name %q is reserved (leading __); set the metric name with Sample.Name", k)
	}
	if len(v) > MaxLabelValueLen {
		return fmt.Sprintf("label %q value is %d bytes, at most %d are allowed", k, len(v), MaxLabelValueLen)
	}
	if !utf8.ValidString(v) {
		return fmt.Sprintf("label %q value is not valid UTF-8", k)
	}
	return ""
}

func validMetricName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

func validLabelName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// SeriesString renders a series in selector form, labels sorted, for messages.
func SeriesString(name string, labels map[string]string) string {
	ls := make([]Label, 0, len(labels))
	for k, v := range labels {
		ls = append(ls, Label{Name: k, Value: v})
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	return LabelsString(name, ls)
}

// LabelsString renders a series given as sorted labels like SeriesString.
func LabelsString(name string, labels []Label) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// Window is the range of timestamps a store accepts, in Unix milliseconds.
type Window struct {
	MinMs, MaxMs int64
}

// AcceptWindow returns the accepted timestamps at now for a retention;
// retention <= 0 means no lower bound (the server decides).
func AcceptWindow(now time.Time, retention time.Duration) Window {
	w := Window{MinMs: -1 << 63, MaxMs: now.Add(MaxFutureSkew).UnixMilli()}
	if retention > 0 {
		w.MinMs = now.Add(-retention).UnixMilli()
	}
	return w
}

// Classify reports whether ms is inside w (0), too old (-1) or too new (+1).
func (w Window) Classify(ms int64) int {
	switch {
	case ms < w.MinMs:
		return -1
	case ms > w.MaxMs:
		return 1
	}
	return 0
}
