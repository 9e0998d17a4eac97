package vmembed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmstorage"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"

	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// maxImportBody bounds one /api/v1/import/prometheus request body.
const maxImportBody = 64 << 20

// Handler serves the Prometheus-compatible subset of VictoriaMetrics' HTTP
// API over this store, for proxying MetricsQL and Grafana:
//
//	/api/v1/query, /api/v1/query_range, /api/v1/series,
//	/api/v1/label/NAME/values (GET or POST form)
//	/api/v1/import/prometheus (Prometheus text, millisecond timestamps)
//	/internal/force_flush, /health
//
// plus VictoriaMetrics' storage endpoints (/snapshot/*, /internal/force_merge).
//
// Why not VictoriaMetrics' own vmselect/vminsert handlers: importing
// app/vmselect or app/vminsert pulls in scrape discovery (oauth2, cloud SDKs,
// yaml.v2, fasttemplate) that the module's go.sum does not carry. Once it
// does, this can delegate to vmselect.RequestHandler/vminsert.RequestHandler
// for the full API (vmui, export, labels, ...).
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Store) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/prometheus")
	switch path {
	case "/health":
		_, _ = io.WriteString(w, "OK")
	case "/api/v1/query":
		s.httpQuery(w, r, false)
	case "/api/v1/query_range":
		s.httpQuery(w, r, true)
	case "/api/v1/series":
		s.httpSeries(w, r)
	case "/api/v1/import/prometheus":
		s.httpImport(w, r)
	case "/internal/force_flush":
		if err := s.Flush(r.Context()); err != nil {
			httpError(w, http.StatusServiceUnavailable, "unavailable", err)
			return
		}
		w.WriteHeader(http.StatusOK)
	default:
		if label, ok := labelValuesPath(path); ok {
			s.httpLabelValues(w, r, label)
			return
		}
		if err := s.acquire(r.Context()); err != nil {
			httpError(w, http.StatusServiceUnavailable, "unavailable", err)
			return
		}
		defer s.mu.RUnlock()
		if !vmstorage.RequestHandler(w, r) {
			http.NotFound(w, r)
		}
	}
}

func (s *Store) httpQuery(w http.ResponseWriter, r *http.Request, isRange bool) {
	expr := r.FormValue("query")
	if expr == "" {
		httpError(w, http.StatusBadRequest, "bad_data", errors.New("missing query parameter"))
		return
	}
	now := time.Now()
	var (
		res []tsdb.Series
		err error
	)
	if isRange {
		var q tsdb.QueryRange
		q.Expr = expr
		if q.Start, err = promapi.ParseTime(r.FormValue("start"), now.Add(-5*time.Minute)); err == nil {
			if q.End, err = promapi.ParseTime(r.FormValue("end"), now); err == nil {
				q.Step, err = promapi.ParseStep(r.FormValue("step"))
			}
		}
		if err != nil {
			httpError(w, http.StatusBadRequest, "bad_data", err)
			return
		}
		res, err = s.QueryRange(r.Context(), q)
	} else {
		var at time.Time
		if at, err = promapi.ParseTime(r.FormValue("time"), now); err != nil {
			httpError(w, http.StatusBadRequest, "bad_data", err)
			return
		}
		res, err = s.Query(r.Context(), expr, at)
	}
	if err != nil {
		httpError(w, statusOf(err), "execution", err)
		return
	}
	type series struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value,omitempty"`
		Values [][]any           `json:"values,omitempty"`
	}
	out := make([]series, len(res))
	for i, sr := range res {
		out[i].Metric = sr.Labels
		if isRange {
			out[i].Values = make([][]any, len(sr.Points))
			for j, p := range sr.Points {
				out[i].Values[j] = promPoint(p)
			}
		} else if len(sr.Points) > 0 {
			out[i].Value = promPoint(sr.Points[len(sr.Points)-1])
		}
	}
	kind := "vector"
	if isRange {
		kind = "matrix"
	}
	writeJSON(w, map[string]any{"status": "success", "data": map[string]any{"resultType": kind, "result": out}})
}

func promPoint(p tsdb.Point) []any {
	return []any{json.Number(strconv.FormatFloat(float64(p.T.UnixMilli())/1e3, 'f', -1, 64)), strconv.FormatFloat(p.V, 'g', -1, 64)}
}

// seriesArgs reads the match[], start and end parameters of the series and
// label values endpoints.
func seriesArgs(r *http.Request) (matches []string, start, end time.Time, err error) {
	if err := r.ParseForm(); err != nil {
		return nil, start, end, err
	}
	matches = r.Form["match[]"]
	if len(matches) == 0 {
		return nil, start, end, errors.New("missing match[] parameter")
	}
	now := time.Now()
	if start, err = promapi.ParseTime(r.FormValue("start"), now.Add(-5*time.Minute)); err != nil {
		return nil, start, end, err
	}
	if end, err = promapi.ParseTime(r.FormValue("end"), now); err != nil {
		return nil, start, end, err
	}
	return matches, start, end, nil
}

func (s *Store) httpSeries(w http.ResponseWriter, r *http.Request) {
	matches, start, end, err := seriesArgs(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_data", err)
		return
	}
	out := []map[string]string{}
	for _, m := range matches {
		got, err := s.SeriesMatch(r.Context(), m, start, end)
		if err != nil {
			httpError(w, statusOf(err), "execution", err)
			return
		}
		out = append(out, got...)
	}
	writeJSON(w, map[string]any{"status": "success", "data": out})
}

// labelValuesPath returns NAME of /api/v1/label/NAME/values.
func labelValuesPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/api/v1/label/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/values")
	return name, ok && name != "" && !strings.Contains(name, "/")
}

func (s *Store) httpLabelValues(w http.ResponseWriter, r *http.Request, label string) {
	matches, start, end, err := seriesArgs(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_data", err)
		return
	}
	seen := map[string]bool{}
	for _, m := range matches {
		got, err := s.LabelValues(r.Context(), label, m, start, end)
		if err != nil {
			httpError(w, statusOf(err), "execution", err)
			return
		}
		for _, v := range got {
			seen[v] = true
		}
	}
	writeJSON(w, map[string]any{"status": "success", "data": slices.Sorted(maps.Keys(seen))})
}

func (s *Store) httpImport(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxImportBody+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_data", fmt.Errorf("read request body: %w", err))
		return
	}
	if len(body) > maxImportBody {
		httpError(w, http.StatusRequestEntityTooLarge, "bad_data", fmt.Errorf("request body exceeds %d bytes; split the import", maxImportBody))
		return
	}
	var rows prometheus.Rows
	var parseErr error
	rows.UnmarshalWithErrLogger(string(body), func(msg string) {
		if parseErr == nil {
			parseErr = errors.New(msg)
		}
	})
	if parseErr != nil {
		httpError(w, http.StatusBadRequest, "bad_data", parseErr)
		return
	}
	now := time.Now()
	samples := make([]tsdb.Sample, len(rows.Rows))
	for i, row := range rows.Rows {
		sm := tsdb.Sample{Name: row.Metric, Value: row.Value, Timestamp: now}
		if row.Timestamp != 0 {
			sm.Timestamp = time.UnixMilli(row.Timestamp)
		}
		if len(row.Tags) > 0 {
			sm.Labels = make(map[string]string, len(row.Tags))
			for _, tg := range row.Tags {
				sm.Labels[tg.Key] = tg.Value
			}
		}
		samples[i] = sm
	}
	if err := s.Write(r.Context(), samples); err != nil {
		httpError(w, statusOf(err), "bad_data", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func statusOf(err error) int {
	var ise *tsdb.InvalidSampleError
	switch {
	case errors.Is(err, tsdb.ErrTooLarge):
		return http.StatusUnprocessableEntity
	case errors.As(err, &ise):
		return http.StatusBadRequest
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusUnprocessableEntity
}

func httpError(w http.ResponseWriter, code int, kind string, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": kind, "error": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
