// Package promapi serves the read half of Prometheus' HTTP API
// (https://prometheus.io/docs/prometheus/latest/querying/api/) over a
// Backend, so that Grafana's Prometheus data source, promtool and scripts
// query unyo as they query Prometheus:
//
//	/api/v1/query, /api/v1/query_range     (GET or POST form)
//	/api/v1/series, /api/v1/labels, /api/v1/label/NAME/values
//	/api/v1/metadata, /api/v1/status/buildinfo
//
// A cluster serves its own TSDB (tsdb.Store is a Backend); root serves a
// Backend that evaluates across clusters (see Plan in global.go). Callers
// authenticate as for the rest of the API: Options.Authorize runs first.
package promapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/VictoriaMetrics/metricsql"

	"github.com/unyo-ops/unyo/core/tsdb"
)

// Backend answers the queries; tsdb.Store implements it.
type Backend interface {
	Query(ctx context.Context, expr string, at time.Time) ([]tsdb.Series, error)
	QueryRange(ctx context.Context, q tsdb.QueryRange) ([]tsdb.Series, error)
	SeriesMatch(ctx context.Context, match string, start, end time.Time) ([]map[string]string, error)
	LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error)
}

// Options configures a Handler.
type Options struct {
	// Backend answers the queries; nil answers every query with an error
	// saying why (Unavailable).
	Backend Backend
	// Unavailable explains a nil Backend ("this cluster keeps no metrics").
	Unavailable string
	// Authorize authenticates and authorizes the request and returns the
	// context to serve it with (carrying the caller); nil serves everyone.
	Authorize func(r *http.Request) (context.Context, error)
	// Version is unyo's version, reported by status/buildinfo.
	Version string
	// MaxBody bounds a POST form; default 1 MiB.
	MaxBody int64
}

// PrometheusVersion is the Prometheus release whose API this imitates;
// status/buildinfo reports it as "version" because Grafana picks its
// query features by that number (VictoriaMetrics does the same).
const PrometheusVersion = "2.24.0"

// Handler serves the API under /api/v1/ (and under any prefix ending in it,
// such as root's /clusters/NAME/api/v1/).
func Handler(o Options) http.Handler {
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	return &handler{o: o}
}

type handler struct{ o Options }

// warnings collects a request's non-fatal trouble (a cluster that did not
// answer) for the "warnings" field Grafana shows on the panel.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

type warningsKey struct{}

// Warn records a warning for the response of the request ctx belongs to.
func Warn(ctx context.Context, msg string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok {
		w.mu.Lock()
		w.msgs = append(w.msgs, msg)
		w.mu.Unlock()
	}
}

// CollectWarnings returns ctx collecting the warnings of the queries made
// with it, and a function returning those collected so far: for callers
// other than the HTTP API (root's autoscaler) that must not act on a
// partial answer.
func CollectWarnings(ctx context.Context) (context.Context, func() []string) {
	w := &warnings{}
	return context.WithValue(ctx, warningsKey{}, w), func() []string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Clone(w.msgs)
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := strings.LastIndex(r.URL.Path, "/api/v1/")
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	path := r.URL.Path[i+len("/api/v1"):]
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		apiError(w, http.StatusMethodNotAllowed, "bad_data", fmt.Errorf("method %s: use GET or POST", r.Method))
		return
	}
	ctx := r.Context()
	if h.o.Authorize != nil {
		var err error
		if ctx, err = h.o.Authorize(r); err != nil {
			apiError(w, statusOf(err), "unauthorized", err)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.o.MaxBody)
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, "bad_data", fmt.Errorf("read the request's form: %w", err))
		return
	}
	warn := &warnings{}
	ctx = context.WithValue(ctx, warningsKey{}, warn)
	var (
		data any
		err  error
	)
	switch {
	case path == "/status/buildinfo":
		data = map[string]string{"version": PrometheusVersion, "revision": h.o.Version, "branch": "", "buildUser": "", "buildDate": "", "goVersion": "", "unyoVersion": h.o.Version}
	case path == "/metadata":
		// unyo keeps no metric metadata; an empty answer is valid and
		// makes Grafana fall back to names only.
		data = map[string]any{}
	case h.o.Backend == nil:
		err = unavailable(h.o.Unavailable)
	case path == "/query":
		data, err = h.query(ctx, r, false)
	case path == "/query_range":
		data, err = h.query(ctx, r, true)
	case path == "/series":
		data, err = h.series(ctx, r)
	case path == "/labels":
		data, err = h.labels(ctx, r)
	default:
		label, ok := labelValuesPath(path)
		if !ok {
			apiError(w, http.StatusNotFound, "not_found", fmt.Errorf("%s is not part of the Prometheus API unyo serves", r.URL.Path))
			return
		}
		data, err = h.labelValues(ctx, r, label)
	}
	if err != nil {
		kind := "execution"
		var bad badData
		if errors.As(err, &bad) {
			kind = "bad_data"
		}
		apiError(w, statusOf(err), kind, err)
		return
	}
	out := map[string]any{"status": "success", "data": data}
	if len(warn.msgs) > 0 {
		out["warnings"] = warn.msgs
	}
	writeJSON(w, http.StatusOK, out)
}

// badData marks an error in the request rather than in its evaluation.
type badData struct{ error }

func (b badData) Unwrap() error { return b.error }

type unavailableError string

func (u unavailableError) Error() string { return string(u) }

func unavailable(why string) error {
	if why == "" {
		why = "no metrics store"
	}
	return unavailableError(why)
}

// ParseTime accepts Unix seconds (fractional) or RFC 3339, as Prometheus.
func ParseTime(v string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.UnixMilli(int64(math.Round(f * 1e3))), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badData{fmt.Errorf("cannot parse time %q: want Unix seconds or RFC 3339", v)}
	}
	return t, nil
}

// ParseStep accepts seconds (fractional) or a Prometheus duration (15s, 1m).
func ParseStep(v string) (time.Duration, error) {
	if v == "" {
		return 0, badData{errors.New("missing step parameter")}
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f <= 0 {
			return 0, badData{fmt.Errorf("step %q: must be positive", v)}
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	ms, err := metricsql.PositiveDurationValue(v, 0)
	if err != nil || ms <= 0 {
		return 0, badData{fmt.Errorf("cannot parse step %q: want seconds or a duration such as 15s", v)}
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func checkExpr(expr string) error {
	if expr == "" {
		return badData{errors.New("missing query parameter")}
	}
	if _, err := metricsql.Parse(expr); err != nil {
		return badData{fmt.Errorf("query %q: %w", expr, err)}
	}
	return nil
}

// maxRangePoints mirrors Prometheus' 11,000 points per series limit on
// query_range, so that a tiny step fails clearly instead of slowly.
const maxRangePoints = 11000

func (h *handler) query(ctx context.Context, r *http.Request, isRange bool) (any, error) {
	expr := r.FormValue("query")
	if err := checkExpr(expr); err != nil {
		return nil, err
	}
	now := time.Now()
	if !isRange {
		at, err := ParseTime(r.FormValue("time"), now)
		if err != nil {
			return nil, err
		}
		res, err := h.o.Backend.Query(ctx, expr, at)
		if err != nil {
			return nil, err
		}
		out := make([]promSeries, 0, len(res))
		for _, s := range res {
			ps := promSeries{Metric: nonNil(s.Labels)}
			if len(s.Points) == 0 {
				continue
			}
			v := promPoint(s.Points[len(s.Points)-1])
			ps.Value = &v
			out = append(out, ps)
		}
		return map[string]any{"resultType": "vector", "result": out}, nil
	}
	var (
		q   = tsdb.QueryRange{Expr: expr}
		err error
	)
	if q.Start, err = ParseTime(r.FormValue("start"), time.Time{}); err != nil {
		return nil, err
	}
	if q.End, err = ParseTime(r.FormValue("end"), time.Time{}); err != nil {
		return nil, err
	}
	if q.Start.IsZero() || q.End.IsZero() {
		return nil, badData{errors.New("query_range needs start and end")}
	}
	if q.End.Before(q.Start) {
		return nil, badData{errors.New("end timestamp must not be before start time")}
	}
	if q.Step, err = ParseStep(r.FormValue("step")); err != nil {
		return nil, err
	}
	if q.End.Sub(q.Start)/q.Step > maxRangePoints {
		return nil, badData{fmt.Errorf("exceeded maximum resolution of %d points per timeseries; try decreasing the query resolution (?step=XX)", maxRangePoints)}
	}
	res, err := h.o.Backend.QueryRange(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]promSeries, 0, len(res))
	for _, s := range res {
		ps := promSeries{Metric: nonNil(s.Labels), Values: make([][2]any, len(s.Points))}
		for j, p := range s.Points {
			ps.Values[j] = promPoint(p)
		}
		out = append(out, ps)
	}
	return map[string]any{"resultType": "matrix", "result": out}, nil
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  *[2]any           `json:"value,omitempty"`
	Values [][2]any          `json:"values,omitempty"`
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func promValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func promPoint(p tsdb.Point) [2]any {
	return [2]any{json.Number(strconv.FormatFloat(float64(p.T.UnixMilli())/1e3, 'f', -1, 64)), promValue(p.V)}
}

// everything selects every series: Prometheus allows labels and label
// values without match[]; VictoriaMetrics needs a non-empty matcher.
const everything = `{__name__=~".+"}`

// seriesArgs reads match[], start and end. Prometheus' defaults are all
// time; unyo's are the last hour, so that an unbounded request does not scan
// the whole retention.
func seriesArgs(r *http.Request, needMatch bool) (matches []string, start, end time.Time, err error) {
	matches = r.Form["match[]"]
	if len(matches) == 0 {
		if needMatch {
			return nil, start, end, badData{errors.New("no match[] parameter provided")}
		}
		matches = []string{everything}
	}
	for _, m := range matches {
		if err := checkExpr(m); err != nil {
			return nil, start, end, err
		}
	}
	now := time.Now()
	if end, err = ParseTime(r.FormValue("end"), now); err != nil {
		return nil, start, end, err
	}
	if start, err = ParseTime(r.FormValue("start"), end.Add(-time.Hour)); err != nil {
		return nil, start, end, err
	}
	return matches, start, end, nil
}

func (h *handler) series(ctx context.Context, r *http.Request) (any, error) {
	matches, start, end, err := seriesArgs(r, true)
	if err != nil {
		return nil, err
	}
	out := []map[string]string{}
	seen := map[string]bool{}
	for _, m := range matches {
		got, err := h.o.Backend.SeriesMatch(ctx, m, start, end)
		if err != nil {
			return nil, err
		}
		for _, l := range got {
			if k := labelsKey(l); !seen[k] {
				seen[k] = true
				out = append(out, l)
			}
		}
	}
	return out, nil
}

func (h *handler) labels(ctx context.Context, r *http.Request) (any, error) {
	matches, start, end, err := seriesArgs(r, false)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, m := range matches {
		got, err := h.o.Backend.SeriesMatch(ctx, m, start, end)
		if err != nil {
			return nil, err
		}
		for _, l := range got {
			for k := range l {
				names[k] = true
			}
		}
	}
	return append([]string{}, slices.Sorted(maps.Keys(names))...), nil
}

func labelValuesPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/label/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/values")
	return name, ok && name != "" && !strings.Contains(name, "/")
}

func (h *handler) labelValues(ctx context.Context, r *http.Request, label string) (any, error) {
	matches, start, end, err := seriesArgs(r, false)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range matches {
		got, err := h.o.Backend.LabelValues(ctx, label, m, start, end)
		if err != nil {
			return nil, err
		}
		for _, v := range got {
			seen[v] = true
		}
	}
	return append([]string{}, slices.Sorted(maps.Keys(seen))...), nil
}

// labelsKey is a label set's identity.
func labelsKey(l map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[k]))
		b.WriteByte(',')
	}
	return b.String()
}

// statusOf maps an error to the status Prometheus would answer with.
func statusOf(err error) int {
	var (
		bad badData
		un  unavailableError
	)
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest
	case errors.As(err, &un):
		return http.StatusServiceUnavailable
	case errors.Is(err, tsdb.ErrTooLarge):
		return http.StatusUnprocessableEntity
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeInvalidArgument:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeFailedPrecondition:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnprocessableEntity
}

func apiError(w http.ResponseWriter, code int, kind string, err error) {
	writeJSON(w, code, map[string]string{"status": "error", "errorType": kind, "error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
