// Package logstore is unyo's log store: one interface with two backends, the
// embedded VictoriaLogs storage (vlembed, the default) and ClickHouse
// (clickhouse). Both pass the same contract suite (logstoretest), so callers
// can rely on the behaviour documented here rather than on a backend.
//
// Contract, in short:
//
//   - Write normalizes every entry with Prepare (see there: UTC, valid UTF-8,
//     capped sizes, future timestamps clamped, entries older than the retention
//     rejected). A write is visible to the next Query on the same Store.
//   - Query returns entries newest first; Trace returns them oldest first.
//     Entries with equal timestamps come in no particular order.
//   - Since is inclusive, Until exclusive; a zero value means unbounded.
//   - Grep is a case-sensitive substring match on the message (not a regexp):
//     operators paste text from a log line, and regexp metacharacters in it
//     must not change the meaning.
//   - Host, App and TraceID match exactly; Levels match any of the given
//     levels, compared in lower case.
//   - Fields match exactly, every one given: an entry matches when its
//     Entry.Fields holds each key with that value; an empty value matches
//     entries without the key (Write drops empty values). Keys are plain
//     names, as for ByField. Callers that look for records by what they are
//     (the event history by check and outcome) use Fields, never Grep, so
//     that rewording a message cannot change what they find.
//   - DropBefore removes whole UTC days that end at or before t; the day that
//     contains t is kept.
//   - Errors from an unreachable backend are returned as such: callers spool
//     and retry.
package logstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits and defaults shared by all backends.
const (
	// DefaultLimit is used when Query.Limit is 0.
	DefaultLimit = 1000
	// MaxLimit is the largest Query.Limit; larger limits fail with ErrTooLarge.
	// Trace and Stats fail with ErrTooLarge when their result would exceed it.
	MaxLimit = 100000
	// MaxMessageBytes caps Entry.Message; longer messages are truncated and
	// marked with FieldTruncated.
	MaxMessageBytes = 64 << 10
	// MaxLabelBytes caps Host, App, Level, TraceID and Cluster.
	MaxLabelBytes = 1024
	// MaxFieldKeyBytes caps the length of a Fields key (VictoriaLogs allows 128
	// bytes per field name, and the embedded backend prefixes keys).
	MaxFieldKeyBytes = 100
	// MaxFields caps the number of Fields per entry.
	MaxFields = 64
	// MaxFieldBytes caps the total size of all Fields values of one entry, so a
	// whole entry stays well under VictoriaLogs' 2 MiB per-entry limit (which
	// drops oversize entries silently).
	MaxFieldBytes = 128 << 10
	// MaxFuture is how far ahead of the store's clock an entry may be; later
	// entries are clamped to now (hosts with broken clocks still get logged).
	MaxFuture = 24 * time.Hour
	// DefaultRetention is used by backends when no retention is configured.
	DefaultRetention = 30 * 24 * time.Hour
)

// Fields the store adds to an entry when it had to change it.
const (
	// FieldTruncated holds the original message length in bytes when the
	// message was cut to MaxMessageBytes.
	FieldTruncated = "unyo_truncated"
	// FieldOrigTime holds the original timestamp (RFC 3339) of an entry whose
	// time was clamped because it was too far in the future.
	FieldOrigTime = "unyo_orig_time"
	// FieldsDropped holds how many Fields were dropped because of MaxFields or
	// MaxFieldBytes.
	FieldsDropped = "unyo_fields_dropped"
)

// Stats groupings; ByField(name) groups by a field of Entry.Fields.
const (
	ByLevel = "level"
	ByApp   = "app"
	ByHost  = "host"
)

// byFieldPrefix starts a grouping by an Entry.Fields key.
const byFieldPrefix = "field:"

// ByField is the Stats grouping by the value of Entry.Fields[name]; entries
// without the field count under the key "". The event history uses it to
// count events by check.
func ByField(name string) string { return byFieldPrefix + name }

// GroupField returns the field name of a ByField grouping.
func GroupField(by string) (name string, ok bool) { return strings.CutPrefix(by, byFieldPrefix) }

// fieldNameRE is what a ByField name may be: backends put it into their
// query languages, so it is kept to plain names.
var fieldNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

var (
	// ErrTooLarge means a query asked for (or would return) more than MaxLimit
	// rows; narrow the time range or filters.
	ErrTooLarge = errors.New("result too large")
	// ErrInvalidQuery wraps every validation failure of a Query or Stats call.
	ErrInvalidQuery = errors.New("invalid log query")
	// ErrRejected means some entries of a Write were not stored because they
	// were older than the retention; the rest were written. Retrying the same
	// batch will not help and would duplicate the stored entries.
	ErrRejected = errors.New("log entries rejected")
)

// Entry is one log line.
type Entry struct {
	Time    time.Time
	Host    string
	App     string
	Level   string
	TraceID string
	Message string
	Fields  map[string]string
	Cluster string
}

// Query selects entries. The zero value selects the newest DefaultLimit entries.
type Query struct {
	Since, Until time.Time // Since inclusive, Until exclusive; zero = unbounded
	Host         string    // exact match
	App          string    // exact match
	ExceptApp    string    // exact mismatch: leave out this app's entries
	TraceID      string    // exact match
	Levels       []string  // any of; compared in lower case
	Grep         string    // case-sensitive substring of Message
	// Fields match Entry.Fields exactly, each one; "" matches a missing key.
	Fields map[string]string
	Limit  int // 0 = DefaultLimit; > MaxLimit = ErrTooLarge
}

// Bucket is the count of entries with one Key in one time interval.
type Bucket struct {
	Start time.Time // UTC, aligned to multiples of the interval since the Unix epoch
	Key   string    // the level, app or host value
	Count int64
	// Errors and Warnings count the entries of the bucket whose level is an
	// error or a warning level (see IsErrorLevel, IsWarningLevel). They make
	// rates available for every grouping, not just by level.
	Errors   int64
	Warnings int64
}

// ErrorRate is the share of error entries in the bucket, 0 for an empty bucket.
func (b Bucket) ErrorRate() float64 { return rate(b.Errors, b.Count) }

// WarningRate is the share of warning entries in the bucket.
func (b Bucket) WarningRate() float64 { return rate(b.Warnings, b.Count) }

func rate(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}

// Stats is the result of a Stats call with its parameters, for printing.
type Stats struct {
	By       string
	Interval time.Duration
	Buckets  []Bucket
}

// NewStats bundles buckets as returned by Store.Stats.
func NewStats(by string, interval time.Duration, buckets []Bucket) Stats {
	b := slices.Clone(buckets)
	SortBuckets(b)
	return Stats{By: by, Interval: interval, Buckets: b}
}

// Totals sums the buckets of each interval over all keys, giving the overall
// count and error/warning rates per interval, in time order.
func (s Stats) Totals() []Bucket {
	var out []Bucket
	for _, b := range s.Buckets {
		if n := len(out); n > 0 && out[n-1].Start.Equal(b.Start) {
			out[n-1].Count += b.Count
			out[n-1].Errors += b.Errors
			out[n-1].Warnings += b.Warnings
			continue
		}
		b.Key = ""
		out = append(out, b)
	}
	return out
}

// SortBuckets orders buckets by start time, then key; backends return this order.
func SortBuckets(b []Bucket) {
	sort.Slice(b, func(i, j int) bool {
		if !b[i].Start.Equal(b[j].Start) {
			return b[i].Start.Before(b[j].Start)
		}
		return b[i].Key < b[j].Key
	})
}

// Store is a log store backend.
type Store interface {
	// Write stores entries after normalizing them with Prepare. It returns an
	// error wrapping ErrRejected if some entries were too old to store.
	Write(ctx context.Context, entries []Entry) error
	// Query returns matching entries, newest first.
	Query(ctx context.Context, q Query) ([]Entry, error)
	// Stats counts the entries matching q (q.Limit is ignored) per interval
	// and per value of by (ByLevel, ByApp, ByHost or ByField), ordered as
	// SortBuckets.
	Stats(ctx context.Context, q Query, by string, interval time.Duration) ([]Bucket, error)
	// Trace returns every entry of one trace across hosts, oldest first.
	// since/until may be zero; bounding them makes the lookup cheaper.
	Trace(ctx context.Context, traceID string, since, until time.Time) ([]Entry, error)
	// DropBefore removes all whole UTC days ending at or before t.
	DropBefore(ctx context.Context, t time.Time) error
	Close() error
}

// StreamRevealer is a Store that can hide lines after an unclean shutdown
// until their stream is written to again (VictoriaLogs: a stream's
// registration in its index may reach the disk after the stream's rows do).
// RevealStreams makes such lines visible without storing a line of its own
// that any query returns. Whoever compares what a store holds against what
// it should (the telemetry WAL's replay) calls it first.
type StreamRevealer interface {
	RevealStreams(ctx context.Context, streams []Stream) error
}

// Stream is one host and app at one time: the lines of that host and app
// on that time's UTC day.
type Stream struct {
	Host, App string
	Time      time.Time
}

// ErrorLevels are the (lower-case) levels counted as errors.
func ErrorLevels() []string {
	return []string{"error", "err", "fatal", "critical", "crit", "panic", "emerg", "emergency", "alert"}
}

// WarningLevels are the (lower-case) levels counted as warnings.
func WarningLevels() []string { return []string{"warn", "warning"} }

// IsErrorLevel reports whether level (already lower case) counts as an error.
func IsErrorLevel(level string) bool { return slices.Contains(ErrorLevels(), level) }

// IsWarningLevel reports whether level (already lower case) counts as a warning.
func IsWarningLevel(level string) bool { return slices.Contains(WarningLevels(), level) }

// Normalize validates q and fills in defaults. Backends call it first.
func (q Query) Normalize() (Query, error) {
	switch {
	case q.Limit < 0:
		return q, fmt.Errorf("%w: limit %d is negative", ErrInvalidQuery, q.Limit)
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit > MaxLimit:
		return q, fmt.Errorf("%w: limit %d exceeds the maximum of %d", ErrTooLarge, q.Limit, MaxLimit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return q, fmt.Errorf("%w: until (%s) must be after since (%s)", ErrInvalidQuery,
			q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	q.Since, q.Until = q.Since.UTC(), q.Until.UTC()
	q.Host = strings.ToValidUTF8(q.Host, "\uFFFD")
	q.App = strings.ToValidUTF8(q.App, "\uFFFD")
	q.ExceptApp = strings.ToValidUTF8(q.ExceptApp, "\uFFFD")
	q.TraceID = strings.ToValidUTF8(q.TraceID, "\uFFFD")
	q.Grep = strings.ToValidUTF8(q.Grep, "\uFFFD")
	if len(q.Fields) > 0 {
		fields := make(map[string]string, len(q.Fields))
		for k, v := range q.Fields {
			if err := checkFieldName(k); err != nil {
				return q, err
			}
			fields[k] = strings.ToValidUTF8(v, "\uFFFD")
		}
		q.Fields = fields
	}
	levels := make([]string, 0, len(q.Levels))
	for _, l := range q.Levels {
		l = normLevel(l)
		if l != "" && !slices.Contains(levels, l) {
			levels = append(levels, l)
		}
	}
	q.Levels = levels
	return q, nil
}

// CheckStats validates the grouping and interval of a Stats call.
func CheckStats(by string, interval time.Duration) error {
	switch name, isField := GroupField(by); {
	case by == ByLevel, by == ByApp, by == ByHost:
	case isField && checkFieldName(name) == nil:
	default:
		return fmt.Errorf("%w: cannot group by %q: use level, app, host or field:NAME (NAME of letters, digits, '_', '.', '-')", ErrInvalidQuery, by)
	}
	if interval < time.Second || interval%time.Second != 0 {
		return fmt.Errorf("%w: interval %s must be a whole number of seconds, at least 1s", ErrInvalidQuery, interval)
	}
	return nil
}

// checkFieldName refuses a field name that is not a plain name: backends put
// it into their query languages.
func checkFieldName(name string) error {
	if len(name) > MaxFieldKeyBytes || !fieldNameRE.MatchString(name) {
		return fmt.Errorf("%w: field name %q: use letters, digits, '_', '.' and '-', at most %d bytes", ErrInvalidQuery, name, MaxFieldKeyBytes)
	}
	return nil
}

// CheckTraceID validates a Trace argument.
func CheckTraceID(traceID string) error {
	if traceID == "" {
		return fmt.Errorf("%w: trace ID is empty", ErrInvalidQuery)
	}
	return nil
}

func normLevel(l string) string {
	return strings.ToLower(strings.TrimSpace(strings.ToValidUTF8(l, "\uFFFD")))
}

// Prepare normalizes entries for storage; every backend's Write uses it, so
// all backends store the same thing:
//
//   - times are converted to UTC; a zero time becomes now;
//   - times more than MaxFuture after now are clamped to now and the original
//     is kept in FieldOrigTime;
//   - times before now-retention are rejected (counted in the second result);
//   - invalid UTF-8 is replaced with U+FFFD in every string;
//   - Level is trimmed and lower-cased;
//   - Message is cut to MaxMessageBytes on a rune boundary, with the original
//     length in FieldTruncated; labels are cut to MaxLabelBytes;
//   - Fields: empty keys and empty values are dropped (VictoriaLogs cannot
//     store empty values), keys are cut to MaxFieldKeyBytes, values to
//     MaxMessageBytes, and at most MaxFields fields and MaxFieldBytes bytes of
//     values are kept (in key order), the number dropped in FieldsDropped.
//
// The input is not modified.
func Prepare(entries []Entry, now time.Time, retention time.Duration) (out []Entry, rejected int) {
	if retention <= 0 {
		retention = DefaultRetention
	}
	now = now.UTC()
	oldest := now.Add(-retention)
	out = make([]Entry, 0, len(entries))
	for _, e := range entries {
		var extra map[string]string
		setExtra := func(k, v string) {
			if extra == nil {
				extra = map[string]string{}
			}
			extra[k] = v
		}
		switch {
		case e.Time.IsZero():
			e.Time = now
		case e.Time.After(now.Add(MaxFuture)):
			setExtra(FieldOrigTime, e.Time.UTC().Format(time.RFC3339Nano))
			e.Time = now
		case e.Time.Before(oldest):
			rejected++
			continue
		}
		e.Time = e.Time.UTC()
		e.Host = capString(e.Host, MaxLabelBytes)
		e.App = capString(e.App, MaxLabelBytes)
		e.Level = capString(normLevel(e.Level), MaxLabelBytes)
		e.TraceID = capString(e.TraceID, MaxLabelBytes)
		e.Cluster = capString(e.Cluster, MaxLabelBytes)
		e.Message = strings.ToValidUTF8(e.Message, "\uFFFD")
		if len(e.Message) > MaxMessageBytes {
			setExtra(FieldTruncated, strconv.Itoa(len(e.Message)))
			e.Message = capString(e.Message, MaxMessageBytes)
		}
		e.Fields = prepareFields(e.Fields, extra)
		out = append(out, e)
	}
	return out, rejected
}

func prepareFields(in, extra map[string]string) map[string]string {
	if len(in) == 0 && len(extra) == 0 {
		return nil
	}
	if fieldsOK(in) {
		// Fast path for the common case: a plain copy, no sorting.
		out := make(map[string]string, len(in)+len(extra))
		maps.Copy(out, in)
		maps.Copy(out, extra)
		return out
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(in)+len(extra))
	dropped, total := 0, 0
	for _, k := range keys {
		v := capString(in[k], MaxMessageBytes)
		k = capString(k, MaxFieldKeyBytes)
		if k == "" || v == "" {
			continue
		}
		if len(out) >= MaxFields || total+len(v) > MaxFieldBytes {
			dropped++
			continue
		}
		total += len(v)
		out[k] = v
	}
	// Markers are added last so user fields cannot crowd them out, and they
	// override user fields of the same name: they describe what the store did.
	for k, v := range extra {
		out[k] = v
	}
	if dropped > 0 {
		out[FieldsDropped] = strconv.Itoa(dropped)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// fieldsOK reports whether prepareFields would keep in unchanged.
func fieldsOK(in map[string]string) bool {
	if len(in) > MaxFields {
		return false
	}
	total := 0
	for k, v := range in {
		total += len(v)
		if k == "" || v == "" || len(k) > MaxFieldKeyBytes || len(v) > MaxMessageBytes ||
			!utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return total <= MaxFieldBytes
}

// capString makes s valid UTF-8 and cuts it to at most n bytes on a rune boundary.
func capString(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// DayStart returns the start of the UTC day containing t.
func DayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// DropDay reports whether DropBefore(t) removes the UTC day starting at day:
// only days that end at or before t.
func DropDay(day, t time.Time) bool {
	return !day.Add(24 * time.Hour).After(t)
}

// RejectedError builds the error Write returns when Prepare rejected entries.
func RejectedError(rejected int, retention time.Duration) error {
	if rejected == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d entries are older than the retention of %s and were not stored", ErrRejected, rejected, retention)
}
