// Package metricformat turns the output of a check that prints metrics
// (Prometheus text, Influx line protocol, Graphite plaintext or OpenTSDB put
// lines) into samples, a message and a report of what was not understood.
// The lines are parsed with VictoriaMetrics' lib/protoparser (see
// internal/vmparse); this package adds what a check needs around it: the
// message line, names the TSDB accepts, timestamps it accepts, limits, and
// malformed lines named for the operator.
//
// The status of such a check still comes from its exit code (Nagios
// convention).
package metricformat

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/checks/metricformat/internal/vmparse"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// Limits of one run of a metric-printing check.
const (
	// MaxOutput is the output kept of a metric-printing check, instead of
	// agent.max_output: about 40,000 Prometheus lines, a large exporter's
	// worth, while a runaway check still costs the agent at most 4 MiB.
	MaxOutput = 4 << 20
	// MaxSamples is the most samples one run yields; the rest are dropped
	// and counted. Twice a busy node's system metrics.
	MaxSamples = 20_000
	// MaxAge is how old a printed timestamp may be: 24 hours, the shortest
	// retention VictoriaMetrics allows, so every cluster's TSDB accepts the
	// sample. With tsdb.MaxFutureSkew ahead it bounds the timestamps used;
	// a sample with a timestamp outside takes the run's time instead.
	MaxAge = 24 * time.Hour
	// maxReported is how many malformed lines a result names.
	maxReported = 3
	// maxQuoted bounds a malformed line quoted in a result.
	maxQuoted = 80
)

// Sample is one parsed value. Labels are sorted by name.
type Sample struct {
	Name   string
	Labels []tsdb.Label
	TimeMs int64
	Value  float64
}

// BadLine is one line that was not understood.
type BadLine struct {
	Line   int // from 1
	Text   string
	Reason string
}

// Result is what a check's output held.
type Result struct {
	// Message is the output's first line (blank lines and # comments
	// aside) when the format's parser does not take it: the check's status
	// text, as a Nagios plugin prints it. Empty otherwise.
	Message string
	Samples []Sample
	// Bad are the first malformed lines; BadCount counts all of them.
	Bad      []BadLine
	BadCount int
	// Unread counts the lines not read, or not wholly kept, because
	// MaxSamples were reached.
	Unread int
	// OutOfWindow counts samples whose printed timestamp was outside the
	// accepted window and took the run's time.
	OutOfWindow int
}

// Options tell Parse about the run.
type Options struct {
	// Check is set as the label check on every sample (replacing the
	// format's own check label, kept as exported_check).
	Check string
	// RunTime is the time of samples without a usable timestamp.
	RunTime time.Time
	// Truncated says the output was cut at its limit: its last line, when
	// unfinished, is not read.
	Truncated bool
}

// reserved labels are set by unyo (check here, node by the cluster); a
// format's own label of that name is kept renamed, as Prometheus does with
// honor_labels: false.
var reserved = []string{"check", "node"}

// Parse reads output printed in format f (not Nagios).
func Parse(f checks.MetricsFormat, output string, opts Options) Result {
	p := parser{f: f, opts: opts, minMs: opts.RunTime.Add(-MaxAge).UnixMilli(), maxMs: opts.RunTime.Add(tsdb.MaxFutureSkew).UnixMilli()}
	if opts.Truncated {
		if i := strings.LastIndexByte(output, '\n'); i >= 0 {
			output = output[:i+1]
		}
	}
	lineNo := 0
	first := true
	for rest := output; len(rest) > 0; {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		lineNo++
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		if len(p.res.Samples) >= MaxSamples {
			// Counting is all that is left to do: a check printing a
			// million lines costs no more than MaxSamples parsed ones.
			p.res.Unread++
			continue
		}
		err := p.line(trimmed)
		var refused *refusedError
		switch {
		case err == nil:
		case vmparse.IsNoRow(err):
			continue
		case first && !errors.As(err, &refused):
			p.res.Message = trimmed
		default:
			p.bad(lineNo, trimmed, err.Error())
		}
		first = false
	}
	return p.res
}

// Report words r for a check result: the message (the check's own, or a
// summary) and the lines added to the long output about what was skipped.
func (r *Result) Report(f checks.MetricsFormat, truncated bool) (message string, long []string) {
	message = r.Message
	summary := fmt.Sprintf("%d samples (%s)", len(r.Samples), f)
	if message == "" {
		message = summary
	} else {
		long = append(long, "unyo: "+summary)
	}
	if truncated {
		long = append(long, fmt.Sprintf("unyo: output cut at %d MiB, the limit for checks printing metrics; later lines were not read", MaxOutput>>20))
	}
	if r.Unread > 0 {
		long = append(long, fmt.Sprintf("unyo: stopped at %d samples, the most kept per run; %d more lines not read", MaxSamples, r.Unread))
	}
	if r.OutOfWindow > 0 {
		long = append(long, fmt.Sprintf("unyo: %d samples printed a time more than %.0fh old or %.0fh ahead; they take the run's time", r.OutOfWindow, MaxAge.Hours(), tsdb.MaxFutureSkew.Hours()))
	}
	if r.BadCount > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "unyo: %d malformed %s lines ignored: ", r.BadCount, f)
		for i, l := range r.Bad {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "line %d %q: %s", l.Line, l.Text, l.Reason)
		}
		if r.BadCount > len(r.Bad) {
			fmt.Fprintf(&b, "; and %d more", r.BadCount-len(r.Bad))
		}
		long = append(long, b.String())
	}
	return message, long
}

type parser struct {
	f            checks.MetricsFormat
	opts         Options
	vm           vmparse.Parser
	res          Result
	minMs, maxMs int64
}

func (p *parser) bad(line int, text, reason string) {
	p.res.BadCount++
	if len(p.res.Bad) < maxReported {
		if len(text) > maxQuoted {
			text = strings.ToValidUTF8(text[:maxQuoted], "") + "…"
		}
		p.res.Bad = append(p.res.Bad, BadLine{Line: line, Text: text, Reason: reason})
	}
}

// line parses one line into samples; a line whose samples the TSDB would
// refuse is malformed as a whole (a *refusedError).
func (p *parser) line(s string) error {
	var (
		row vmparse.Row
		err error
		// toMs converts the format's timestamp unit.
		toMs func(int64) int64
	)
	switch p.f {
	case checks.MetricsPrometheus:
		row, err = p.vm.Prometheus(s)
		toMs = func(t int64) int64 { return t }
	case checks.MetricsInflux:
		row, err = p.vm.Influx(s)
		// Nanoseconds: the protocol's default precision.
		toMs = func(t int64) int64 { return t / 1e6 }
	case checks.MetricsGraphite:
		row, err = p.vm.Graphite(s)
		toMs = func(t int64) int64 { return t * 1000 }
	case checks.MetricsOpenTSDB:
		row, err = p.vm.OpenTSDB(s)
		// OpenTSDB takes seconds, or milliseconds when given more than ten
		// digits.
		toMs = func(t int64) int64 {
			if t >= 1e10 {
				return t
			}
			return t * 1000
		}
	default:
		return fmt.Errorf("format %q is not parsed here", p.f)
	}
	if err != nil {
		return err
	}
	ms := p.opts.RunTime.UnixMilli()
	outside := false
	if row.Timestamp != 0 {
		if t := toMs(row.Timestamp); t >= p.minMs && t <= p.maxMs {
			ms = t
		} else {
			outside = true
		}
	}
	labels := make([]tsdb.Label, 0, len(row.Tags)+1)
	for _, t := range row.Tags {
		name := sanitize(t.Key, false)
		if slices.Contains(reserved, name) {
			name = "exported_" + name
		}
		labels = append(labels, tsdb.Label{Name: name, Value: t.Value})
	}
	labels = append(labels, tsdb.Label{Name: "check", Value: p.opts.Check})
	slices.SortFunc(labels, func(a, b tsdb.Label) int { return strings.Compare(a.Name, b.Name) })
	var samples []Sample
	add := func(name string, v float64) error {
		sp := tsdb.SeriesPoints{Name: name, Labels: labels}
		if err := tsdb.ValidateSeries(0, &sp); err != nil {
			var ise *tsdb.InvalidSampleError
			if errors.As(err, &ise) {
				return &refusedError{ise.Reason}
			}
			return err
		}
		samples = append(samples, Sample{Name: name, Labels: labels, TimeMs: ms, Value: v})
		return nil
	}
	if p.f == checks.MetricsInflux {
		for _, fl := range row.Fields {
			// measurement_field, as VictoriaMetrics names Influx fields.
			name := fl.Key
			if row.Metric != "" {
				name = row.Metric + "_" + fl.Key
			}
			if err := add(sanitize(name, true), fl.Value); err != nil {
				return err
			}
		}
	} else if err := add(sanitize(row.Metric, true), row.Value); err != nil {
		return err
	}
	if room := MaxSamples - len(p.res.Samples); len(samples) > room {
		samples = samples[:room]
		p.res.Unread++
	}
	p.res.Samples = append(p.res.Samples, samples...)
	if outside {
		p.res.OutOfWindow += len(samples)
	}
	return nil
}

// refusedError is a line that parsed but that the TSDB would refuse (too
// many labels, a value too long): never the message, always malformed.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return e.reason }

// sanitize makes a Graphite, OpenTSDB or Influx name a valid Prometheus
// metric (metric) or label name: every other character becomes '_', and a
// leading digit gets a '_' before it. "servers.web1.load" becomes
// "servers_web1_load".
func sanitize(s string, metric bool) string {
	ok := func(i int, c byte) bool {
		return c == '_' || (metric && c == ':') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !ok(i, s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		b.WriteByte('_')
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; ok(1, c) {
			b.WriteByte(c)
		} else if c < 0x80 || c >= 0xC0 {
			// One '_' per character, not per byte of a multi-byte one.
			b.WriteByte('_')
		}
	}
	return b.String()
}
