package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/spool"
)

// status is what the agent's status endpoint reports: enough for a cluster
// probing a node whose heartbeats stopped, and for an operator on the node.
type status struct {
	mu            sync.Mutex
	Registered    bool                   `json:"registered"`
	LastHeartbeat time.Time              `json:"last_heartbeat"`
	LastSendError string                 `json:"last_send_error,omitempty"`
	Sent          int64                  `json:"results_sent"`
	Checks        []string               `json:"checks"`
	Latest        map[string]checkResult `json:"latest"`
}

type checkResult struct {
	Status string    `json:"status"`
	Output string    `json:"output"`
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

func (a *Agent) serveStatus(ctx context.Context) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /status", a.statusHandler())
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

// statusHandler answers /status.
func (a *Agent) statusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := a.spool.Stats()
		// The metrics and logs spools, shown when telemetry is on: an
		// operator watching a store outage sees them grow and drain.
		telemetry := map[string]spool.Stats{}
		for _, o := range []*outbox{a.metrics, a.logs} {
			if sp := o.spoolOrNil(); sp != nil {
				telemetry[o.name] = sp.Stats()
			}
		}
		plugins := a.pluginStatus()
		buffer := a.overflow.stats()
		a.status.mu.Lock()
		body, err := json.Marshal(struct {
			Node  string `json:"node"`
			Spool any    `json:"spool"`
			// ResultBuffer holds results the spool could not take, and
			// counts those dropped when it was full.
			ResultBuffer   bufferStats            `json:"result_buffer"`
			TelemetrySpool map[string]spool.Stats `json:"telemetry_spools,omitempty"`
			Plugins        any                    `json:"plugins,omitempty"`
			*status
		}{a.opts.NodeName, st, buffer, telemetry, plugins, &a.status})
		a.status.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}
