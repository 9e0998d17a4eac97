// Package vmparse is the one place unyo calls VictoriaMetrics' text protocol
// parsers (lib/protoparser: prometheus, influx, graphite, opentsdb), one line
// at a time, and hands back rows that own their strings.
//
// Those parsers come with process-wide state this package keeps away from
// the rest of unyo: the graphite parser reads the flag
// -graphite.sanitizeMetricName from flag.CommandLine (never set by unyo, so
// it stays false), and the graphite and opentsdb parsers report a rejected
// line only by writing to VictoriaMetrics' own logger (stderr). So that a
// check printing garbage does not fill the agent's stderr and so that the
// operator gets a reason, lines of those two formats are first checked here
// for the shape the parser expects, and only well-shaped lines reach it.
package vmparse

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/graphite"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/influx"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/opentsdb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// Tag is one label of a row.
type Tag struct{ Key, Value string }

// Field is one value of an Influx row.
type Field struct {
	Key   string
	Value float64
}

// Row is one parsed line. Prometheus, Graphite and OpenTSDB rows have a
// Value; Influx rows have Fields instead. Timestamp is as printed, in the
// format's unit (0 when the line has none).
type Row struct {
	Metric    string // the Influx measurement
	Tags      []Tag
	Fields    []Field
	Value     float64
	Timestamp int64
}

// Parser parses lines, reusing its buffers. It is not safe for concurrent use.
type Parser struct {
	prom     prometheus.Rows
	influx   influx.Rows
	graphite graphite.Rows
	opentsdb opentsdb.Rows
}

// errNoRow is returned for a line the parser skipped without a complaint.
var errNoRow = errors.New("no sample in the line")

// Prometheus parses one line of the Prometheus text exposition format.
func (p *Parser) Prometheus(line string) (Row, error) {
	var perr string
	p.prom.UnmarshalWithErrLogger(line, func(s string) { perr = s })
	if perr != "" {
		return Row{}, errors.New(strings.TrimPrefix(perr, "cannot unmarshal Prometheus line "+strconv.Quote(line)+": "))
	}
	if len(p.prom.Rows) != 1 {
		return Row{}, errNoRow
	}
	r := &p.prom.Rows[0]
	return Row{Metric: strings.Clone(r.Metric), Tags: cloneTags(r.Tags), Value: r.Value, Timestamp: r.Timestamp}, nil
}

// cloneTags copies a parser's tags: they point into its reused buffers.
func cloneTags[T ~struct{ Key, Value string }](in []T) []Tag {
	out := make([]Tag, len(in))
	for i, t := range in {
		// Go has no field access on type parameters; the conversion is
		// what the constraint allows.
		tag := Tag(t)
		out[i] = Tag{strings.Clone(tag.Key), strings.Clone(tag.Value)}
	}
	return out
}

// Influx parses one line of the Influx line protocol.
func (p *Parser) Influx(line string) (Row, error) {
	if err := p.influx.Unmarshal(line, false); err != nil {
		// The parser quotes the line; the caller names it already.
		msg := err.Error()
		if i := strings.LastIndex(msg, "\": "); i >= 0 && strings.HasPrefix(msg, "incorrect influx line ") {
			msg = msg[i+3:]
		}
		return Row{}, errors.New(msg)
	}
	if len(p.influx.Rows) != 1 {
		return Row{}, errNoRow
	}
	r := &p.influx.Rows[0]
	row := Row{Metric: strings.Clone(r.Measurement), Tags: cloneTags(r.Tags), Timestamp: r.Timestamp}
	for _, f := range r.Fields {
		row.Fields = append(row.Fields, Field{strings.Clone(f.Key), f.Value})
	}
	if len(row.Fields) == 0 {
		return Row{}, errors.New("no numeric field")
	}
	return row, nil
}

// Graphite parses one line of Graphite's plaintext protocol:
// METRIC[;TAG=VALUE...] VALUE [TIMESTAMP] (seconds).
func (p *Parser) Graphite(line string) (Row, error) {
	f := strings.Fields(line)
	switch {
	case len(f) < 2 || len(f) > 3:
		return Row{}, fmt.Errorf("%d fields, want METRIC[;TAG=VALUE...] VALUE [TIMESTAMP]", len(f))
	case !isNumber(f[1]):
		return Row{}, fmt.Errorf("value %q is not a number", f[1])
	case len(f) == 3 && !isNumber(f[2]):
		return Row{}, fmt.Errorf("timestamp %q is not a number of seconds", f[2])
	}
	p.graphite.Unmarshal(line)
	if len(p.graphite.Rows) != 1 {
		return Row{}, errors.New("not a Graphite plaintext line")
	}
	r := &p.graphite.Rows[0]
	return Row{Metric: strings.Clone(r.Metric), Tags: cloneTags(r.Tags), Value: r.Value, Timestamp: r.Timestamp}, nil
}

// OpenTSDB parses one line of OpenTSDB's telnet protocol:
// put METRIC TIMESTAMP VALUE [TAG=VALUE ...].
func (p *Parser) OpenTSDB(line string) (Row, error) {
	f := strings.Fields(line)
	switch {
	case len(f) < 4 || f[0] != "put":
		return Row{}, errors.New("want put METRIC TIMESTAMP VALUE [TAG=VALUE ...]")
	case !isNumber(f[2]):
		return Row{}, fmt.Errorf("timestamp %q is not a number", f[2])
	case !isNumber(f[3]):
		return Row{}, fmt.Errorf("value %q is not a number", f[3])
	}
	for _, t := range f[4:] {
		if k, _, ok := strings.Cut(t, "="); !ok || k == "" {
			return Row{}, fmt.Errorf("tag %q is not TAG=VALUE", t)
		}
	}
	p.opentsdb.Unmarshal(line)
	if len(p.opentsdb.Rows) != 1 {
		return Row{}, errors.New("not an OpenTSDB put line")
	}
	r := &p.opentsdb.Rows[0]
	return Row{Metric: strings.Clone(r.Metric), Tags: cloneTags(r.Tags), Value: r.Value, Timestamp: r.Timestamp}, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// IsNoRow reports whether err means the line held no sample (a blank or a
// comment line) rather than a malformed one.
func IsNoRow(err error) bool { return errors.Is(err, errNoRow) }
