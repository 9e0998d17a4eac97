// Package apifuzz drives every RPC method of the unyo API with arbitrary
// request bytes, for the fuzz targets of the servers that implement them
// (core/cluster, core/root). The bytes are decoded as the method's request
// message, sent through a real client to a real server, and the answer must
// be a success or a well-formed refusal: never a panic, a dropped
// connection, an Internal or Unknown error, or a request left hanging.
package apifuzz

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
)

// Node is the node the seeds of agent methods speak for; the harness
// registers it before fuzzing so that they reach past the node lookup.
const Node = "fuzz-node"

// Method is one RPC: its procedure name, a valid request to seed the
// corpus with, and a call that decodes bytes into its request and sends it.
type Method struct {
	Procedure string
	Seed      proto.Message
	// Call returns errSkip when the bytes are not a request message.
	Call func(ctx context.Context, payload []byte) error
}

var errSkip = errors.New("not a request message")

func method[Req, Resp any, PReq interface {
	*Req
	proto.Message
}](procedure string, seed PReq, call func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error)) Method {
	return Method{Procedure: procedure, Seed: seed, Call: func(ctx context.Context, payload []byte) error {
		req := PReq(new(Req))
		if err := proto.Unmarshal(payload, req); err != nil {
			return errSkip
		}
		_, err := call(ctx, connect.NewRequest((*Req)(req)))
		return err
	}}
}

// Methods lists every RPC of the API, called through c.
func Methods(c *client.Clients) []Method {
	now := timestamppb.Now()
	node := &unyov1.Node{Name: Node, Labels: map[string]string{"role": "web"}, Address: "127.0.0.1:7070", AgentVersion: "dev"}
	result := &unyov1.Event{Id: "0190c5d6-0000-7000-8000-000000000001", Node: Node, Check: "disk", Level: unyov1.Level_LEVEL_WARNING,
		Status: unyov1.CheckStatus_CHECK_STATUS_WARNING, Output: "DISK WARNING - 85% used", LongOutput: "/ 85%",
		Perfdata: []*unyov1.PerfData{{Label: "/", Value: 85, Uom: "%", Warn: "80", Crit: "90"}}, StartedAt: now,
		Duration: durationpb.New(20 * time.Millisecond), Sequence: 1, Occurrences: 1, Reissue: durationpb.New(time.Minute)}
	target, _ := structpb.NewStruct(map[string]any{"address": "db:5432"})
	check := &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "disk", Labels: map[string]string{"team": "ops"},
		Spec: &unyov1.CheckSpec{Command: []string{"check_disk", "-w", "20%"}, Interval: "30s", NodeSelector: map[string]string{"role": "web"}}}}}
	plugin := &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "db",
		Spec: &unyov1.CheckSpec{Interval: "30s", Plugin: &unyov1.PluginCheck{Name: "tcp", Target: target}}}}}
	rule := &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{Name: "page",
		Spec: &unyov1.EventRuleSpec{Type: "action", Owner: "ops", Reason: "page on critical disks", Match: &unyov1.EventMatch{Levels: []string{"critical"}, Labels: map[string]string{"team": "ops"}},
			Actions: []*unyov1.Action{{Kind: &unyov1.Action_CreateAlert{CreateAlert: &unyov1.CreateAlertAction{Level: "critical"}}}}}}}}
	window := &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: &unyov1.Maintenance{Name: "patching",
		Spec: &unyov1.MaintenanceSpec{Nodes: []string{Node}, Reason: "kernel update", Owner: "ops"}}}}
	ref := &unyov1.ObjectRef{Kind: "Check", Name: "disk"}
	hour := timestamppb.New(now.AsTime().Add(-time.Hour))
	logs := &unyov1.LogFilter{Since: hour, Until: now, App: "nginx", Levels: []string{"error"}, Grep: "timeout", Limit: 100}
	return []Method{
		method("AgentService/Register", &unyov1.RegisterRequest{Node: node}, c.Agent.Register),
		method("AgentService/Heartbeat", &unyov1.HeartbeatRequest{Node: Node, Plugins: []*unyov1.PluginStatus{{Kind: "check", Name: "tcp", State: "running", Since: now}}}, c.Agent.Heartbeat),
		method("AgentService/ReportResults", &unyov1.ReportResultsRequest{Node: Node, Results: []*unyov1.Event{result}}, c.Agent.ReportResults),
		method("AgentService/GetChecks", &unyov1.GetChecksRequest{Node: Node}, c.Agent.GetChecks),
		method("AgentService/RenewCertificate", &unyov1.RenewCertificateRequest{Node: Node, Csr: []byte("not a csr")}, c.Agent.RenewCertificate),
		method("ObjectService/Apply", &unyov1.ApplyRequest{Objects: []*unyov1.Object{check, plugin, rule, window}}, c.Objects.Apply),
		method("ObjectService/Delete", &unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{ref}}, c.Objects.Delete),
		method("ObjectService/Get", &unyov1.GetRequest{Ref: ref}, c.Objects.Get),
		method("ObjectService/List", &unyov1.ListRequest{Kind: "EventRule"}, c.Objects.List),
		method("NodeService/ListNodes", &unyov1.ListNodesRequest{}, c.Nodes.ListNodes),
		method("NodeService/GetNode", &unyov1.GetNodeRequest{Name: Node}, c.Nodes.GetNode),
		method("EventService/ListEvents", &unyov1.ListEventsRequest{Node: Node, Check: "disk", Levels: []unyov1.Level{unyov1.Level_LEVEL_WARNING}, History: true, Limit: 50}, c.Events.ListEvents),
		method("EventService/GetEvent", &unyov1.GetEventRequest{Id: result.GetId()}, c.Events.GetEvent),
		method("AlertService/ListAlerts", &unyov1.ListAlertsRequest{States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN}, Limit: 10}, c.Alerts.ListAlerts),
		method("AlertService/GetAlert", &unyov1.GetAlertRequest{Id: "1"}, c.Alerts.GetAlert),
		method("AlertService/AckAlert", &unyov1.AlertActionRequest{Id: "1", By: "ops", Reason: "looking"}, c.Alerts.AckAlert),
		method("AlertService/CloseAlert", &unyov1.AlertActionRequest{Id: "1", By: "ops", Reason: "fixed"}, c.Alerts.CloseAlert),
		method("MaintenanceService/EndMaintenance", &unyov1.EndMaintenanceRequest{Name: "patching", By: "ops"}, c.Maintenance.EndMaintenance),
		method("ClusterService/RegisterCluster", &unyov1.RegisterClusterRequest{Name: "c9", Url: "http://127.0.0.1:9"}, c.Cluster.RegisterCluster),
		method("ClusterService/ListClusters", &unyov1.ListClustersRequest{}, c.Cluster.ListClusters),
		method("StatusService/GetStatus", &unyov1.GetStatusRequest{}, c.Status.GetStatus),
		method("MetricsService/WriteMetrics", &unyov1.WriteMetricsRequest{Node: Node, Samples: []*unyov1.Sample{{Name: "cpu_usage", Labels: map[string]string{"cpu": "0"}, Value: 0.5, TimeMs: now.AsTime().UnixMilli()}}}, c.Metrics.WriteMetrics),
		method("MetricsService/QueryRange", &unyov1.QueryRangeRequest{Expr: `rate(cpu_usage[5m])`, Start: hour, End: now, Step: durationpb.New(time.Minute)}, c.Metrics.QueryRange),
		method("MetricsService/Query", &unyov1.QueryMetricsRequest{Expr: `cpu_usage{cpu="0"}`, Time: now}, c.Metrics.Query),
		method("MetricsService/Series", &unyov1.SeriesRequest{Match: `{__name__="cpu_usage"}`, Start: hour, End: now}, c.Metrics.Series),
		method("LogsService/WriteLogs", &unyov1.WriteLogsRequest{Node: Node, Entries: []*unyov1.LogEntry{{Time: now, App: "nginx", Level: "error", Message: "upstream timeout", FileId: "f1", Sequence: 1, Offset: 10}}}, c.Logs.WriteLogs),
		method("LogsService/Query", &unyov1.QueryLogsRequest{Filter: logs}, c.Logs.Query),
		method("LogsService/Stats", &unyov1.LogStatsRequest{Filter: logs, By: "level", Interval: durationpb.New(time.Minute)}, c.Logs.Stats),
		method("LogsService/Trace", &unyov1.TraceLogsRequest{TraceId: "4bf92f3577b34da6a3ce929d0e0e4736", Since: hour, Until: now}, c.Logs.Trace),
		method("StatsService/MetricStats", &unyov1.MetricStatsRequest{Selector: `cpu_usage{cpu="0"}`, Resolution: "1h", Since: hour, Until: now, Limit: 100}, c.Stats.MetricStats),
		method("StatsService/CountStats", &unyov1.CountStatsRequest{Kind: "events", By: "level", Since: hour, Until: now}, c.Stats.CountStats),
	}
}

// Pick returns the method named procedure, or, for any other name the
// fuzzer made up, one chosen by its hash, so that every input reaches a
// handler.
func Pick(methods []Method, procedure string) Method {
	for _, m := range methods {
		if m.Procedure == procedure {
			return m
		}
	}
	h := fnv.New32a()
	h.Write([]byte(procedure))
	return methods[h.Sum32()%uint32(len(methods))]
}

// Call sends payload to m and says what was wrong with the answer, if
// anything: only a success or a refusal with a specific code is right.
func Call(m Method, payload []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := m.Call(ctx, payload)
	if err == nil || errors.Is(err, errSkip) {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%s: not a connect error: %w", m.Procedure, err)
	}
	switch ce.Code() {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeDataLoss:
		return fmt.Errorf("%s: %v", m.Procedure, err)
	}
	if ce.Message() == "" {
		return fmt.Errorf("%s: %s without a message", m.Procedure, ce.Code())
	}
	return nil
}

// PanicWatch is a slog.Handler that remembers every record mentioning a
// panic (net/http's "http: panic serving", a recover middleware's), so that
// a fuzz target fails on a panic the server survived.
type PanicWatch struct {
	mu     sync.Mutex
	panics []string
}

func (w *PanicWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *PanicWatch) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	if s := b.String(); strings.Contains(strings.ToLower(s), "panic") {
		w.mu.Lock()
		w.panics = append(w.panics, s)
		w.mu.Unlock()
	}
	return nil
}

func (w *PanicWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *PanicWatch) WithGroup(string) slog.Handler      { return w }

// Take returns the panics logged since the last call.
func (w *PanicWatch) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.panics
	w.panics = nil
	return p
}

// WriteSeeds writes one corpus file per method under dir (a fuzz target's
// testdata/fuzz/FuzzX), in the format of `go test -fuzz`: the procedure
// name and the seed request's bytes.
func WriteSeeds(dir string, methods []Method) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, m := range methods {
		body := fmt.Sprintf("go test fuzz v1\nstring(%q)\n[]byte(%q)\n", m.Procedure, m.SeedBytes())
		name := "seed-" + strings.ReplaceAll(m.Procedure, "/", "-")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SeedBytes returns m's seed request as bytes.
func (m Method) SeedBytes() []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Seed)
	if err != nil {
		panic(fmt.Sprintf("%s: seed does not marshal: %v", m.Procedure, err)) // a bug in Methods
	}
	return b
}
