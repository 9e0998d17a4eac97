// Package vmremote is a tsdb.Store backed by a VictoriaMetrics server
// reached over HTTP (single-node API: /api/v1/import/prometheus,
// /api/v1/query_range, /api/v1/query, /api/v1/series, /internal/force_flush).
//
// Writes use the Prometheus text import: it is the cheapest format to produce
// for batches where most samples belong to different series (one short line
// per sample), whereas the JSON-lines import pays off only with many points
// per series (JSON lines was not benchmarked). Errors name the URL and carry
// the server's message; an unreachable server is an error, and callers are
// expected to spool and retry.
//
// Server requirements for the tsdb.Store contract: run it with
// -dedup.minScrapeInterval=1ms (or any positive value), otherwise rewriting a
// batch stores duplicates and *_over_time() counts them twice (verified on
// 1.79.5), and set Options.Retention to its -retentionPeriod.
package vmremote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/internal/vmerr"
)

// Options configures the client.
type Options struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8428. Required.
	URL string
	// HTTPClient defaults to a client with its own connection pool.
	HTTPClient *http.Client
	// Timeout bounds each request when the context has no earlier deadline.
	// Default 30s.
	Timeout time.Duration
	// Retention should equal the server's -retentionPeriod: samples older
	// are dropped and counted here, as the server would drop them silently.
	// Zero disables the check.
	Retention time.Duration
	// MaxSeries is the most series a query may return. Default 100,000.
	MaxSeries int
	// MaxPointsPerSeries is the most points a range query may ask for per
	// series. Default 30,000.
	MaxPointsPerSeries int
	// MaxResponseBytes bounds a query response body. Default 256 MiB.
	MaxResponseBytes int64
}

// Store is a client of one VictoriaMetrics server. It implements tsdb.Store.
type Store struct {
	opts   Options
	base   string
	client *http.Client
	closed atomic.Bool

	written, tooOld, future atomic.Uint64
}

var _ tsdb.Store = (*Store)(nil)
var _ tsdb.StatsReporter = (*Store)(nil)

// ErrClosed is returned by operations on a closed Store.
var ErrClosed = errors.New("vmremote: store is closed")

// Open validates opts and returns a client; it does not contact the server,
// so a server that is down at startup does not prevent spooling.
func Open(opts Options) (*Store, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("vmremote: URL %q must be an absolute http(s) URL such as http://127.0.0.1:8428", opts.URL)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = 100_000
	}
	if opts.MaxPointsPerSeries <= 0 {
		opts.MaxPointsPerSeries = 30_000
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 256 << 20
	}
	return &Store{opts: opts, base: strings.TrimRight(u.String(), "/"), client: opts.HTTPClient}, nil
}

// Close marks the store closed; idle connections of a default client are
// released.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.client.CloseIdleConnections()
	return nil
}

// WriteStats reports how many samples were sent and dropped.
func (s *Store) WriteStats() tsdb.WriteStats {
	return tsdb.WriteStats{Written: s.written.Load(), DroppedTooOld: s.tooOld.Load(), DroppedFuture: s.future.Load()}
}

// bufPool holds request bodies; a 10k-sample batch is about 1 MB.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// Write sends samples as Prometheus text; see tsdb.Store.
func (s *Store) Write(ctx context.Context, samples []tsdb.Sample) error {
	for i := range samples {
		if err := tsdb.ValidateSample(i, &samples[i]); err != nil {
			return fmt.Errorf("vmremote: write rejected: %w", err)
		}
	}
	return s.write(ctx, func(lw *lineWriter) {
		var labels []tsdb.Label
		for i := range samples {
			sm := &samples[i]
			ts := sm.Timestamp.UnixMilli()
			if !lw.inWindow(ts) {
				continue
			}
			labels = labels[:0]
			for k, v := range sm.Labels {
				labels = append(labels, tsdb.Label{Name: k, Value: v})
			}
			sort.Slice(labels, func(i, j int) bool { return labels[i].Name < labels[j].Name })
			lw.b = appendSeries(lw.b, sm.Name, labels)
			lw.point(ts, sm.Value)
		}
	})
}

// WriteSeries sends series as Prometheus text, formatting each series'
// name and labels once; see tsdb.Store.
func (s *Store) WriteSeries(ctx context.Context, series []tsdb.SeriesPoints) error {
	for i := range series {
		if err := tsdb.ValidateSeries(i, &series[i]); err != nil {
			return fmt.Errorf("vmremote: write rejected: %w", err)
		}
	}
	return s.write(ctx, func(lw *lineWriter) {
		for i := range series {
			sr := &series[i]
			prefix := [2]int{-1, -1} // the series' formatted name, once written
			for j, ts := range sr.TimesMs {
				if !lw.inWindow(ts) {
					continue
				}
				if prefix[0] < 0 {
					start := len(lw.b)
					lw.b = appendSeries(lw.b, sr.Name, sr.Labels)
					prefix = [2]int{start, len(lw.b)}
				} else {
					lw.b = append(lw.b, lw.b[prefix[0]:prefix[1]]...)
				}
				lw.point(ts, sr.Values[j])
			}
		}
	})
}

// write builds an import body with fill in a pooled buffer and sends it.
func (s *Store) write(ctx context.Context, fill func(lw *lineWriter)) error {
	if s.closed.Load() {
		return ErrClosed
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	lw := lineWriter{b: (*bp)[:0], win: tsdb.AcceptWindow(time.Now(), s.opts.Retention)}
	fill(&lw)
	*bp = lw.b
	return s.send(ctx, &lw)
}

// lineWriter builds an import body and counts what it keeps and drops.
type lineWriter struct {
	b                 []byte
	win               tsdb.Window
	n, tooOld, future uint64
}

func (lw *lineWriter) inWindow(ts int64) bool {
	switch lw.win.Classify(ts) {
	case -1:
		lw.tooOld++
		return false
	case 1:
		lw.future++
		return false
	}
	return true
}

// point ends a line whose series is written with the value and time.
func (lw *lineWriter) point(ts int64, v float64) {
	lw.b = append(lw.b, ' ')
	lw.b = strconv.AppendFloat(lw.b, v, 'g', -1, 64) // NaN, +Inf, -Inf as Prometheus spells them
	lw.b = append(lw.b, ' ')
	lw.b = strconv.AppendInt(lw.b, ts, 10)
	lw.b = append(lw.b, '\n')
	lw.n++
}

func (s *Store) send(ctx context.Context, lw *lineWriter) error {
	s.tooOld.Add(lw.tooOld)
	s.future.Add(lw.future)
	if lw.n == 0 {
		return nil
	}
	if _, err := s.do(ctx, http.MethodPost, "/api/v1/import/prometheus", "text/plain", bytes.NewReader(lw.b)); err != nil {
		return fmt.Errorf("vmremote: write %d samples: %w", lw.n, err)
	}
	s.written.Add(lw.n)
	return nil
}

// appendSeries appends a series in exposition form: name{k="v",...}.
func appendSeries(b []byte, name string, labels []tsdb.Label) []byte {
	b = append(b, name...)
	if len(labels) == 0 {
		return b
	}
	b = append(b, '{')
	for i, l := range labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.Name...)
		b = append(b, '=', '"')
		b = appendEscaped(b, l.Value)
		b = append(b, '"')
	}
	return append(b, '}')
}

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}

// Flush asks the server to make buffered samples searchable.
func (s *Store) Flush(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if _, err := s.do(ctx, http.MethodGet, "/internal/force_flush", "", nil); err != nil {
		return fmt.Errorf("vmremote: flush: %w", err)
	}
	return nil
}

// QueryRange runs /api/v1/query_range; see tsdb.Store.
func (s *Store) QueryRange(ctx context.Context, q tsdb.QueryRange) ([]tsdb.Series, error) {
	if q.Step <= 0 {
		return nil, fmt.Errorf("vmremote: query %q: step must be positive, got %s", q.Expr, q.Step)
	}
	start, end, step := q.Start.UnixMilli(), q.End.UnixMilli(), max(q.Step.Milliseconds(), 1)
	if end < start {
		return nil, fmt.Errorf("vmremote: query %q: end %s is before start %s", q.Expr, q.End, q.Start)
	}
	// Checked here too: the server's limit may be higher than ours.
	if pts := (end-start)/step + 1; pts > int64(s.opts.MaxPointsPerSeries) {
		return nil, tsdb.TooLarge("metrics.max_points_per_series",
			fmt.Errorf("query %q asks for %d points per series (start=%d, end=%d, step=%dms), more than %d", q.Expr, pts, start, end, step, s.opts.MaxPointsPerSeries))
	}
	form := url.Values{"query": {q.Expr}, "start": {msToSec(start)}, "end": {msToSec(end)}, "step": {strconv.FormatInt(step, 10) + "ms"}}
	return s.query(ctx, "/api/v1/query_range", q.Expr, form)
}

// Query runs /api/v1/query; see tsdb.Store.
func (s *Store) Query(ctx context.Context, expr string, at time.Time) ([]tsdb.Series, error) {
	form := url.Values{"query": {expr}, "time": {msToSec(at.UnixMilli())}}
	return s.query(ctx, "/api/v1/query", expr, form)
}

func msToSec(ms int64) string { return strconv.FormatFloat(float64(ms)/1e3, 'f', 3, 64) }

// promResponse is the Prometheus API envelope.
type promResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

type queryData struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Metric map[string]string `json:"metric"`
		Value  *promPoint        `json:"value"`
		Values []promPoint       `json:"values"`
	} `json:"result"`
}

// promPoint decodes [unix_seconds, "value"].
type promPoint tsdb.Point

func (p *promPoint) UnmarshalJSON(b []byte) error {
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var sec float64
	if err := json.Unmarshal(raw[0], &sec); err != nil {
		return fmt.Errorf("point timestamp: %w", err)
	}
	var vs string
	if err := json.Unmarshal(raw[1], &vs); err != nil {
		return fmt.Errorf("point value: %w", err)
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return fmt.Errorf("point value: %w", err)
	}
	p.T = time.UnixMilli(int64(math.Round(sec * 1e3)))
	p.V = v
	return nil
}

func (s *Store) query(ctx context.Context, path, expr string, form url.Values) ([]tsdb.Series, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	body, err := s.do(ctx, http.MethodPost, path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, vmerr.Classify(fmt.Errorf("vmremote: query %q: %w", expr, err))
	}
	var qd queryData
	if err := decodeData(body, &qd); err != nil {
		return nil, fmt.Errorf("vmremote: query %q: %s%s: %w", expr, s.base, path, err)
	}
	if len(qd.Result) > s.opts.MaxSeries {
		return nil, tsdb.TooLarge("metrics.max_series",
			fmt.Errorf("query %q returned %d series, more than %d", expr, len(qd.Result), s.opts.MaxSeries))
	}
	out := make([]tsdb.Series, 0, len(qd.Result))
	for _, r := range qd.Result {
		sr := tsdb.Series{Labels: r.Metric}
		if sr.Labels == nil {
			sr.Labels = map[string]string{}
		}
		if r.Value != nil {
			sr.Points = []tsdb.Point{tsdb.Point(*r.Value)}
		} else {
			sr.Points = make([]tsdb.Point, len(r.Values))
			for i, p := range r.Values {
				sr.Points[i] = tsdb.Point(p)
			}
		}
		out = append(out, sr)
	}
	return out, nil
}

// SeriesMatch runs /api/v1/series; see tsdb.Store.
func (s *Store) SeriesMatch(ctx context.Context, match string, start, end time.Time) ([]map[string]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	form := url.Values{"match[]": {match}, "start": {msToSec(start.UnixMilli())}, "end": {msToSec(end.UnixMilli())}}
	body, err := s.do(ctx, http.MethodPost, "/api/v1/series", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, vmerr.Classify(fmt.Errorf("vmremote: list series %q: %w", match, err))
	}
	var out []map[string]string
	if err := decodeData(body, &out); err != nil {
		return nil, fmt.Errorf("vmremote: list series %q: %s/api/v1/series: %w", match, s.base, err)
	}
	if len(out) > s.opts.MaxSeries {
		return nil, tsdb.TooLarge("metrics.max_series",
			fmt.Errorf("series %q matched %d series, more than %d", match, len(out), s.opts.MaxSeries))
	}
	return out, nil
}

// LabelValues runs /api/v1/label/NAME/values; see tsdb.Store.
func (s *Store) LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	form := url.Values{"match[]": {match}, "start": {msToSec(start.UnixMilli())}, "end": {msToSec(end.UnixMilli())}}
	path := "/api/v1/label/" + url.PathEscape(label) + "/values"
	body, err := s.do(ctx, http.MethodPost, path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, vmerr.Classify(fmt.Errorf("vmremote: values of label %s in %q: %w", label, match, err))
	}
	var out []string
	if err := decodeData(body, &out); err != nil {
		return nil, fmt.Errorf("vmremote: values of label %s in %q: %s%s: %w", label, match, s.base, path, err)
	}
	if len(out) > tsdb.MaxLabelValues {
		return nil, tsdb.TooLarge("tsdb.MaxLabelValues",
			fmt.Errorf("label %s has %d values in %q, more than %d", label, len(out), match, tsdb.MaxLabelValues))
	}
	sort.Strings(out)
	return out, nil
}

func decodeData(body []byte, into any) error {
	var pr promResponse
	if err := json.Unmarshal(body, &pr); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	if pr.Status != "success" {
		return fmt.Errorf("server answered status %q: %s: %s", pr.Status, pr.ErrorType, pr.Error)
	}
	if err := json.Unmarshal(pr.Data, into); err != nil {
		return fmt.Errorf("decode response data: %w", err)
	}
	return nil
}

// do sends one request and returns the body of a 2xx response. Any other
// status becomes an error naming the URL and quoting the server's text.
func (s *Store) do(ctx context.Context, method, path, contentType string, body io.Reader) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	u := s.base + path
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: server unreachable: %w", method, u, err)
	}
	defer resp.Body.Close()
	// One byte over the limit tells "exactly at the limit" from "cut off".
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(data))
		var pr promResponse
		if json.Unmarshal(data, &pr) == nil && pr.Error != "" {
			msg = pr.Error
		}
		if len(msg) > 2048 {
			msg = msg[:2048] + "..."
		}
		return nil, fmt.Errorf("%s %s: HTTP %s: %s", method, u, resp.Status, msg)
	}
	if int64(len(data)) > s.opts.MaxResponseBytes {
		return nil, tsdb.TooLarge("vmremote Options.MaxResponseBytes",
			fmt.Errorf("%s %s: response exceeds %d bytes", method, u, s.opts.MaxResponseBytes))
	}
	return data, nil
}
