// Package metricbatch writes and reads unyov1.MetricBatch, the form in which
// agents spool metric samples and send them to their cluster: each name and
// label string once per batch, each series' sorted label set once, its
// points as packed numbers. The agent builds a batch per collection with a
// Builder and spools it as one record (AppendRecord), and sends the records
// as they are (DecodeRecords, SetBatches); the cluster turns a batch into
// tsdb.SeriesPoints (Series) without building a map per sample.
//
// Agents before MetricBatch spooled one unyov1.Sample per record;
// DecodeRecords still reads those, so a spool written before an upgrade is
// delivered after it.
package metricbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// recordMagic starts a spool record holding a MetricBatch. A record of an
// older agent is a bare protobuf Sample, which never starts with a zero
// byte (field number 0 does not exist), so the two cannot be confused.
const recordMagic = 0

// Builder accumulates samples into one MetricBatch. The zero value is ready
// to use. It is not safe for concurrent use.
type Builder struct {
	b     *unyov1.MetricBatch
	index map[string]uint32 // string -> its position in b.Strings
	// prev holds the strings of the sample before, by position (name, then
	// label name, label value, ...): successive samples mostly share them,
	// and comparing is cheaper than the index lookup.
	prev    []prevString
	pairs   []uint32 // one series' label pairs while sorting them
	last    int      // where the last series starts in b.Series
	lastMs  int64    // time of the last point, for the next delta
	nPoints int
}

type prevString struct {
	s string
	i uint32
}

// Add adds one point of a series. Labels need not be sorted; the builder
// sorts them. A series' labels must have distinct names (the cluster refuses
// duplicates, naming the series). Invalid UTF-8 in names and values is
// replaced by U+FFFD, as protobuf cannot carry it. A point of the same series
// as the point before joins that series.
func (bl *Builder) Add(name string, labels []tsdb.Label, timeMs int64, value float64) {
	if bl.b == nil {
		bl.b = &unyov1.MetricBatch{}
		if bl.index == nil {
			bl.index = make(map[string]uint32)
		}
		bl.last, bl.lastMs = -1, 0
	}
	nameIdx := bl.str(0, name)
	p := bl.pairs[:0]
	for j, l := range labels {
		p = append(p, bl.str(1+2*j, l.Name), bl.str(2+2*j, l.Value))
	}
	// Insertion sort by label name: label sets are small, and agents'
	// collectors mostly hand them over sorted already.
	strs := bl.b.Strings
	for i := 2; i < len(p); i += 2 {
		for j := i; j > 0 && strs[p[j]] < strs[p[j-2]]; j -= 2 {
			p[j], p[j+1], p[j-2], p[j-1] = p[j-2], p[j-1], p[j], p[j+1]
		}
	}
	bl.pairs = p
	if ser := bl.b.Series; bl.last >= 0 && ser[bl.last] == nameIdx && int(ser[bl.last+1]) == len(labels) && slices.Equal(ser[bl.last+2:], p) {
		bl.b.PointCounts[len(bl.b.PointCounts)-1]++
	} else {
		bl.last = len(ser)
		bl.b.Series = append(ser, nameIdx, uint32(len(labels)))
		bl.b.Series = append(bl.b.Series, p...)
		bl.b.PointCounts = append(bl.b.PointCounts, 1)
	}
	bl.b.TimeMsDeltas = append(bl.b.TimeMsDeltas, timeMs-bl.lastMs)
	bl.b.Values = append(bl.b.Values, value)
	bl.lastMs = timeMs
	bl.nPoints++
}

// str returns the index of s, which is at position pos of its sample.
func (bl *Builder) str(pos int, s string) uint32 {
	if pos < len(bl.prev) && bl.prev[pos].s == s {
		return bl.prev[pos].i
	}
	i, ok := bl.index[s]
	if !ok {
		i = uint32(len(bl.b.Strings))
		bl.index[s] = i
		valid := s
		if !utf8.ValidString(s) {
			valid = strings.ToValidUTF8(s, "\uFFFD")
		}
		bl.b.Strings = append(bl.b.Strings, valid)
	}
	if pos < len(bl.prev) {
		bl.prev[pos] = prevString{s, i}
	} else {
		bl.prev = append(bl.prev, prevString{s, i})
	}
	return i
}

// Points is the number of points added since the last Take.
func (bl *Builder) Points() int { return bl.nPoints }

// Take returns the batch built so far (nil if empty) and starts a new one.
// A Builder kept for the next collection keeps its string index's memory,
// which spares growing it again (a third of the cost of Add).
func (bl *Builder) Take() *unyov1.MetricBatch {
	b := bl.b
	bl.b, bl.nPoints, bl.prev = nil, 0, bl.prev[:0]
	clear(bl.index)
	return b
}

// AppendRecord appends b as a spool record to dst.
func AppendRecord(dst []byte, b *unyov1.MetricBatch) ([]byte, error) {
	out, err := proto.MarshalOptions{}.MarshalAppend(append(dst, recordMagic), b)
	if err != nil {
		return dst, fmt.Errorf("encode a metric batch of %d points: %w", len(b.GetValues()), err)
	}
	return out, nil
}

// Encoded is a MetricBatch in its protobuf encoding, as spooled.
type Encoded struct {
	Raw    []byte
	Points int
}

// DecodeRecords reads spool records for sending. A MetricBatch record is
// kept encoded; only its top-level fields are read, to count its points.
// The one-sample records of older agents are gathered into batches of at
// most maxPoints points. An unreadable record is skipped and reported in bad
// (with the first error), so that it cannot block the spool.
func DecodeRecords(records [][]byte, maxPoints int) (batches []Encoded, bad int, firstErr error) {
	var legacy Builder
	note := func(err error) {
		bad++
		if firstErr == nil {
			firstErr = err
		}
	}
	take := func() {
		b := legacy.Take()
		if b == nil {
			return
		}
		raw, err := proto.Marshal(b)
		if err != nil {
			note(fmt.Errorf("re-encode %d spooled samples of an older agent: %w", len(b.GetValues()), err))
			return
		}
		batches = append(batches, Encoded{Raw: raw, Points: len(b.GetValues())})
	}
	for i, rec := range records {
		if len(rec) > 0 && rec[0] == recordMagic {
			n, err := countPoints(rec[1:])
			if err != nil {
				note(fmt.Errorf("spooled metric batch %d of %d: %w", i+1, len(records), err))
				continue
			}
			batches = append(batches, Encoded{Raw: rec[1:], Points: n})
			continue
		}
		var s unyov1.Sample
		if err := proto.Unmarshal(rec, &s); err != nil {
			note(fmt.Errorf("spooled sample %d of %d (older agent's format): %w", i+1, len(records), err))
			continue
		}
		labels := make([]tsdb.Label, 0, len(s.GetLabels()))
		for k, v := range s.GetLabels() {
			labels = append(labels, tsdb.Label{Name: k, Value: v})
		}
		legacy.Add(s.GetName(), labels, s.GetTimeMs(), s.GetValue())
		if legacy.Points() >= maxPoints {
			take()
		}
	}
	take()
	return batches, bad, firstErr
}

// valuesField is MetricBatch.values' field number.
const valuesField = 5

// countPoints walks an encoded MetricBatch's top-level fields and counts
// its values, packed (as Builder writes them) or not.
func countPoints(raw []byte) (int, error) {
	n := 0
	for len(raw) > 0 {
		num, typ, l := protowire.ConsumeTag(raw)
		if l < 0 {
			return 0, fmt.Errorf("field tag: %w", protowire.ParseError(l))
		}
		raw = raw[l:]
		m := protowire.ConsumeFieldValue(num, typ, raw)
		if m < 0 {
			return 0, fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
		}
		if num == valuesField {
			switch typ {
			case protowire.BytesType:
				v, _ := protowire.ConsumeBytes(raw)
				if len(v)%8 != 0 {
					return 0, fmt.Errorf("packed values of %d bytes, not a multiple of 8", len(v))
				}
				n += len(v) / 8
			case protowire.Fixed64Type:
				n++
			default:
				return 0, fmt.Errorf("values of wire type %d", typ)
			}
		}
		raw = raw[m:]
	}
	return n, nil
}

// batchesField is WriteMetricsRequest.batches' field number.
const batchesField = 3

// SetBatches makes encoded batches req's batches without decoding them:
// a repeated message field is encoded as a tag and a length before each
// message, and protobuf marshals fields it does not know verbatim, so the
// request goes out as if Batches held them. A cluster decodes them as
// Batches. req's other fields are marshalled as usual.
func SetBatches(req *unyov1.WriteMetricsRequest, batches []Encoded) {
	size := 0
	for _, b := range batches {
		size += len(b.Raw) + 2*binary.MaxVarintLen64
	}
	raw := make([]byte, 0, size)
	for _, b := range batches {
		raw = protowire.AppendTag(raw, batchesField, protowire.BytesType)
		raw = protowire.AppendBytes(raw, b.Raw)
	}
	req.ProtoReflect().SetUnknown(raw)
}

// Points counts the points of a batch as its sender declared them.
func Points(b *unyov1.MetricBatch) int { return len(b.GetValues()) }

// ErrMalformed matches (errors.Is) errors of Series about a batch whose
// structure is broken, as opposed to a sample that is invalid.
var ErrMalformed = errors.New("malformed metric batch")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Default is a label Series adds to a series of the metric name unless the
// series has a label of that name: Prometheus' instance and job.
type Default func(name string) tsdb.Label

// Series appends b's series to dst for tsdb.Store.WriteSeries, with the
// label set (a name is required) added to every series, replacing a label
// of the same name: the cluster's node label; and each of defaults where
// the series has no label of its name. The series share three arrays
// allocated here, and their strings are b's. Names and labels are
// validated by the store; Series checks only the batch's structure.
func Series(dst []tsdb.SeriesPoints, b *unyov1.MetricBatch, set tsdb.Label, defaults ...Default) ([]tsdb.SeriesPoints, error) {
	strs, refs, counts := b.GetStrings(), b.GetSeries(), b.GetPointCounts()
	deltas, values := b.GetTimeMsDeltas(), b.GetValues()
	if len(deltas) != len(values) {
		return dst, malformed("%d times but %d values", len(deltas), len(values))
	}
	// Every series has a name, a count and at least one point, so these
	// bound the allocations below by the message's size.
	labels := make([]tsdb.Label, 0, len(refs)/2+(1+len(defaults))*len(counts))
	// extras are what a series gets besides its own labels, sorted by name.
	extras := make([]extra, 0, 1+len(defaults))
	times := make([]int64, len(deltas))
	var t int64
	for i, d := range deltas {
		t += d
		times[i] = t
	}
	str := func(series int, idx uint32) (string, error) {
		if int(idx) >= len(strs) {
			return "", malformed("series #%d refers to string %d of %d", series, idx, len(strs))
		}
		return strs[idx], nil
	}
	pos, point := 0, 0
	for i, n := range counts {
		if pos+2 > len(refs) {
			return dst, malformed("series #%d: the series list ends early", i)
		}
		name, err := str(i, refs[pos])
		if err != nil {
			return dst, err
		}
		nl := int(refs[pos+1])
		pos += 2
		if nl > tsdb.MaxLabels {
			// Refused here, before the store would, to bound the work.
			return dst, malformed("series #%d %s: %d labels, at most %d are allowed", i, name, nl, tsdb.MaxLabels)
		}
		if pos+2*nl > len(refs) {
			return dst, malformed("series #%d %s: its %d labels run past the series list", i, name, nl)
		}
		if n == 0 || point+int(n) > len(times) {
			return dst, malformed("series #%d %s: %d points, %d of %d left", i, name, n, len(times)-point, len(times))
		}
		start := len(labels)
		extras = append(extras[:0], extra{Label: set, replace: true})
		for _, d := range defaults {
			extras = insertExtra(extras, extra{Label: d(name)})
		}
		next := 0 // the first extra not yet placed
		for j := 0; j < nl; j, pos = j+1, pos+2 {
			k, err := str(i, refs[pos])
			if err != nil {
				return dst, err
			}
			v, err := str(i, refs[pos+1])
			if err != nil {
				return dst, err
			}
			for next < len(extras) && extras[next].Name < k {
				labels = append(labels, extras[next].Label)
				next++
			}
			if next < len(extras) && extras[next].Name == k {
				ex := extras[next]
				next++
				if ex.replace {
					labels = append(labels, ex.Label)
					continue
				}
			}
			labels = append(labels, tsdb.Label{Name: k, Value: v})
		}
		for _, ex := range extras[next:] {
			labels = append(labels, ex.Label)
		}
		end := point + int(n)
		dst = append(dst, tsdb.SeriesPoints{Name: name, Labels: labels[start:len(labels):len(labels)],
			TimesMs: times[point:end:end], Values: values[point:end:end]})
		point = end
	}
	if pos != len(refs) || point != len(times) {
		return dst, malformed("%d series use %d of %d series entries and %d of %d points", len(counts), pos, len(refs), point, len(times))
	}
	return dst, nil
}

// extra is a label Series adds: replacing the series' own of its name, or
// only where the series has none.
type extra struct {
	tsdb.Label
	replace bool
}

// insertExtra inserts e into extras sorted by name; a name already there
// (the set label) wins.
func insertExtra(extras []extra, e extra) []extra {
	for i, x := range extras {
		switch {
		case x.Name == e.Name:
			return extras
		case x.Name > e.Name:
			return slices.Insert(extras, i, e)
		}
	}
	return append(extras, e)
}
