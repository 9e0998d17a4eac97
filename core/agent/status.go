package agent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/selfmon"
	"github.com/unyo-ops/unyo/core/spool"
	"github.com/unyo-ops/unyo/plugins/host"
)

// status is what the agent's status endpoint reports: enough for a cluster
// probing a node whose heartbeats stopped, and for an operator on the node.
type status struct {
	mu            sync.Mutex
	Registered    bool
	LastHeartbeat time.Time
	LastSendError string
	Sent          int64
	Checks        []string
	Latest        map[string]checkResult
}

type checkResult struct {
	Status string    `json:"status"`
	Output string    `json:"output,omitempty"`
	At     time.Time `json:"at"`
}

func (s *status) setRegistered(v bool) { s.mu.Lock(); s.Registered = v; s.mu.Unlock() }
func (s *status) heartbeatOK()         { s.mu.Lock(); s.LastHeartbeat = time.Now(); s.mu.Unlock() }
func (s *status) sendFailed(err error) { s.mu.Lock(); s.LastSendError = err.Error(); s.mu.Unlock() }

func (s *status) sent(n int) {
	s.mu.Lock()
	s.Sent += int64(n)
	s.LastSendError = ""
	s.mu.Unlock()
}

func (s *status) setChecks(defs []checks.Definition) {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	sort.Strings(names)
	s.mu.Lock()
	s.Checks = names
	s.mu.Unlock()
}

func (s *status) result(e *unyov1.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Latest == nil {
		s.Latest = map[string]checkResult{}
	}
	s.Latest[e.GetCheck()] = checkResult{Status: e.GetStatus().String(), Output: e.GetOutput(), At: e.GetStartedAt().AsTime()}
}

// statusView is what /status answers. Without the status token it is the
// redacted view: health and counters, no check output and no plugin
// errors, which can carry whatever a check printed (secrets included).
type statusView struct {
	Node     string      `json:"node"`
	Redacted bool        `json:"redacted,omitempty"`
	Spool    spool.Stats `json:"spool"`
	// ResultBuffer holds results the spool could not take, and counts
	// those dropped when it was full.
	ResultBuffer   bufferStats            `json:"result_buffer"`
	TelemetrySpool map[string]spool.Stats `json:"telemetry_spools,omitempty"`
	Plugins        any                    `json:"plugins,omitempty"`
	Registered     bool                   `json:"registered"`
	LastHeartbeat  time.Time              `json:"last_heartbeat"`
	LastSendError  string                 `json:"last_send_error,omitempty"`
	Sent           int64                  `json:"results_sent"`
	Checks         []string               `json:"checks"`
	Latest         map[string]checkResult `json:"latest"`
}

// redactedPlugin is a plugin in the redacted view: its state, not its
// last error (which may quote the plugin's stderr).
type redactedPlugin struct {
	Kind     string     `json:"kind"`
	Name     string     `json:"name"`
	State    host.State `json:"state"`
	Restarts int        `json:"restarts"`
}

// statusAccess decides what a /status request sees: the full view with
// the right bearer token, the redacted view without any, and nothing (401)
// with a wrong one, so that an operator with a mistyped token is told.
func (a *Agent) statusAccess(r *http.Request) (full, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return false, true
	}
	tok, found := strings.CutPrefix(h, "Bearer ")
	if !found || a.opts.StatusToken == "" {
		return false, false
	}
	return true, subtle.ConstantTimeCompare([]byte(tok), []byte(a.opts.StatusToken)) == 1
}

func (a *Agent) statusView(full bool) statusView {
	v := statusView{Node: a.opts.NodeName, Redacted: !full, Spool: a.spool.Stats(), ResultBuffer: a.overflow.stats()}
	// The metrics and logs spools, shown when telemetry is on: an
	// operator watching a store outage sees them grow and drain.
	for _, o := range []*outbox{a.metrics, a.logs} {
		if sp := o.spoolOrNil(); sp != nil {
			if v.TelemetrySpool == nil {
				v.TelemetrySpool = map[string]spool.Stats{}
			}
			v.TelemetrySpool[o.name] = sp.Stats()
		}
	}
	if ps := a.pluginStatus(); full {
		if ps != nil {
			v.Plugins = ps
		}
	} else if len(ps) > 0 {
		rp := make([]redactedPlugin, len(ps))
		for i, p := range ps {
			rp[i] = redactedPlugin{Kind: p.Kind, Name: p.Name, State: p.State, Restarts: p.Restarts}
		}
		v.Plugins = rp
	}
	a.status.mu.Lock()
	defer a.status.mu.Unlock()
	v.Registered, v.LastHeartbeat, v.LastSendError, v.Sent = a.status.Registered, a.status.LastHeartbeat, a.status.LastSendError, a.status.Sent
	v.Checks = slices.Clone(a.status.Checks)
	v.Latest = make(map[string]checkResult, len(a.status.Latest))
	for name, r := range a.status.Latest {
		if !full {
			r.Output = ""
		}
		v.Latest[name] = r
	}
	return v
}

func (a *Agent) serveStatus(ctx context.Context) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /status", a.statusHandler())
	a.collectSelfMetrics()
	mux.Handle("GET /metrics", a.self.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(a.statusLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("status endpoint stopped", "err", err)
	}
}

// collectSelfMetrics adds the agent's queues to /metrics at scrape time:
// each spool's backlog (what waits for the cluster), what it dropped to stay
// within its size, the results held in memory while the spool could not
// take them, and whether the agent is registered.
func (a *Agent) collectSelfMetrics() {
	a.self.Collect(func(w io.Writer) {
		for _, o := range []*outbox{{name: "results", spool: a.spool}, a.metrics, a.logs} {
			if o == nil || o.spool == nil {
				continue
			}
			st := o.spool.Stats()
			l := "{spool=" + selfmon.Label(o.name) + "}"
			selfmon.Gauge(w, "unyo_agent_spool_pending_records"+l, float64(st.PendingRecords))
			selfmon.Gauge(w, "unyo_agent_spool_pending_bytes"+l, float64(st.PendingBytes))
			selfmon.Gauge(w, "unyo_agent_spool_dropped_records_total"+l, float64(st.DroppedRecords))
			selfmon.Gauge(w, "unyo_agent_spool_corruptions_total"+l, float64(st.Corruptions))
		}
		a.overflow.mu.Lock()
		held := len(a.overflow.recs)
		a.overflow.mu.Unlock()
		selfmon.Gauge(w, "unyo_agent_overflow_records", float64(held))
		a.status.mu.Lock()
		registered, failing := a.status.Registered, a.status.LastSendError != ""
		a.status.mu.Unlock()
		selfmon.Gauge(w, "unyo_agent_registered", b2f(registered))
		selfmon.Gauge(w, "unyo_agent_send_failing", b2f(failing))
	})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// statusHandler answers /status: the full view with the status token,
// the redacted one without a token, 401 with a wrong one.
func (a *Agent) statusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		full, ok := a.statusAccess(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="unyo-agent"`)
			http.Error(w, "wrong bearer token: the full /status needs agent.status_token; send no Authorization header for the redacted view", http.StatusUnauthorized)
			return
		}
		body, err := json.Marshal(a.statusView(full))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}
