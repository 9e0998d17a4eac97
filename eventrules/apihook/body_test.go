package apihook_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules/apihook"
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

func critical(id, node string, at time.Time) *unyov1.Event {
	return &unyov1.Event{
		Id: id, Cluster: "tokyo", Node: node, Check: "disk",
		Level: unyov1.Level_LEVEL_CRITICAL, Status: unyov1.CheckStatus_CHECK_STATUS_CRITICAL,
		Output: "DISK CRITICAL - / 95% used <&>", LongOutput: "/var 71% used", ExitCode: 2,
		StartedAt: timestamppb.New(at), Duration: durationpb.New(120 * time.Millisecond),
		ReceivedAt: timestamppb.New(at.Add(time.Second)), Sequence: 42,
		// "node" is a node label that unyo's own label must override.
		Labels: map[string]string{"rack": "r12", "node": "spoofed", "empty": ""},
	}
}

func success(id, node string, at time.Time) *unyov1.Event {
	return &unyov1.Event{
		Id: id, Cluster: "tokyo", Node: node, Check: "disk",
		Level: unyov1.Level_LEVEL_SUCCESS, Status: unyov1.CheckStatus_CHECK_STATUS_OK,
		Output: "DISK OK", StartedAt: timestamppb.New(at),
		Labels: map[string]string{"rack": "r12"},
	}
}

// amWebhook mirrors the webhook payload as Alertmanager documents it
// (https://prometheus.io/docs/alerting/latest/configuration/#webhook_config),
// written from the documentation rather than from this package's types.
// Times are strings so the test sees exactly what receivers see.
type amWebhook struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []amAlert         `json:"alerts"`
}

type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     string            `json:"startsAt"`
	EndsAt       string            `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// decodeAM decodes strictly and checks that every documented key is
// present, since receivers index fields without checking.
func decodeAM(t *testing.T, body []byte) amWebhook {
	t.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, body)
	}
	want := []string{"alerts", "commonAnnotations", "commonLabels", "externalURL", "groupKey", "groupLabels", "receiver", "status", "truncatedAlerts", "version"}
	if got := slices.Sorted(maps.Keys(keys)); !slices.Equal(got, want) {
		t.Errorf("top-level keys = %v, want %v", got, want)
	}
	var alertKeys []map[string]json.RawMessage
	if err := json.Unmarshal(keys["alerts"], &alertKeys); err != nil {
		t.Fatal(err)
	}
	wantAlert := []string{"annotations", "endsAt", "fingerprint", "generatorURL", "labels", "startsAt", "status"}
	for i, a := range alertKeys {
		if got := slices.Sorted(maps.Keys(a)); !slices.Equal(got, wantAlert) {
			t.Errorf("alerts[%d] keys = %v, want %v", i, got, wantAlert)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var m amWebhook
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding as an Alertmanager webhook: %v\n%s", err, body)
	}
	return m
}

func openAlert(e *unyov1.Event) *unyov1.Alert {
	a := alerts.New("web1/disk", unyov1.AlertLevel_ALERT_LEVEL_FATAL, "", e, "disk-page", t0.Add(2*time.Second))
	return a
}

func TestAlertmanagerFiring(t *testing.T) {
	e := critical("ev-1", "web1", t0)
	a := openAlert(e)
	cfg := apihook.Config{Format: "alertmanager", ExternalURL: "https://unyo.example.com"}
	body, err := apihook.Body(cfg, apihook.Payload{Key: "disk-page:ev-1", Rule: "disk-page", Events: []*unyov1.Event{e}, Alert: a, Status: "firing"})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeAM(t, body)

	if m.Version != "4" {
		t.Errorf("version = %q, want 4", m.Version)
	}
	if m.Status != "firing" {
		t.Errorf("status = %q", m.Status)
	}
	if m.Receiver != "disk-page" {
		t.Errorf("receiver = %q, want the rule name", m.Receiver)
	}
	if m.TruncatedAlerts != 0 {
		t.Errorf("truncatedAlerts = %d", m.TruncatedAlerts)
	}
	if m.ExternalURL != "https://unyo.example.com" {
		t.Errorf("externalURL = %q", m.ExternalURL)
	}
	wantLabels := map[string]string{"alertname": "disk", "node": "web1", "cluster": "tokyo", "severity": "fatal", "rack": "r12"}
	if !maps.Equal(m.CommonLabels, wantLabels) {
		t.Errorf("commonLabels = %v, want %v", m.CommonLabels, wantLabels)
	}
	wantGroup := map[string]string{"alertname": "disk", "node": "web1", "cluster": "tokyo", "rack": "r12"}
	if !maps.Equal(m.GroupLabels, wantGroup) {
		t.Errorf("groupLabels = %v, want %v", m.GroupLabels, wantGroup)
	}
	if want := `{}/{rule="disk-page"}:{alertname="disk", cluster="tokyo", node="web1", rack="r12"}`; m.GroupKey != want {
		t.Errorf("groupKey = %s\nwant       %s", m.GroupKey, want)
	}
	wantAnn := map[string]string{
		"summary": "DISK CRITICAL - / 95% used <&>", "description": "/var 71% used",
		"event_id": "ev-1", "alert_id": a.GetId(),
	}
	if !maps.Equal(m.CommonAnnotations, wantAnn) {
		t.Errorf("commonAnnotations = %v, want %v", m.CommonAnnotations, wantAnn)
	}

	if len(m.Alerts) != 1 {
		t.Fatalf("%d alerts, want 1", len(m.Alerts))
	}
	got := m.Alerts[0]
	if got.Status != "firing" {
		t.Errorf("alerts[0].status = %q", got.Status)
	}
	if !maps.Equal(got.Labels, wantLabels) {
		t.Errorf("alerts[0].labels = %v, want %v", got.Labels, wantLabels)
	}
	if !maps.Equal(got.Annotations, wantAnn) {
		t.Errorf("alerts[0].annotations = %v, want %v", got.Annotations, wantAnn)
	}
	if got.StartsAt != "2026-03-01T02:00:02Z" {
		t.Errorf("alerts[0].startsAt = %q, want the alert's first_seen", got.StartsAt)
	}
	if got.EndsAt != "0001-01-01T00:00:00Z" {
		t.Errorf("alerts[0].endsAt = %q, want the zero time while firing", got.EndsAt)
	}
	if got.GeneratorURL != "https://unyo.example.com" {
		t.Errorf("alerts[0].generatorURL = %q", got.GeneratorURL)
	}
	if len(got.Fingerprint) != 16 || strings.Trim(got.Fingerprint, "0123456789abcdef") != "" {
		t.Errorf("alerts[0].fingerprint = %q, want 16 lowercase hex digits", got.Fingerprint)
	}
	if !bytes.Contains(body, []byte("<&>")) {
		t.Errorf("check output was HTML-escaped: %s", body)
	}
}

// The resolved notification of the same problem must be recognisable as
// such: same fingerprint and groupKey, same severity.
func TestAlertmanagerResolvedMatchesFiring(t *testing.T) {
	cfg := apihook.Config{Format: "alertmanager"}
	fe := critical("ev-1", "web1", t0)
	a := openAlert(fe)
	firing, err := apihook.Body(cfg, apihook.Payload{Key: "k1", Rule: "disk-page", Events: []*unyov1.Event{fe}, Alert: a})
	if err != nil {
		t.Fatal(err)
	}
	se := success("ev-2", "web1", t0.Add(10*time.Minute))
	if err := alerts.Resolve(a, "rule:disk-page", "", t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	resolved, err := apihook.Body(cfg, apihook.Payload{Key: "k2", Rule: "disk-page", Events: []*unyov1.Event{se}, Alert: a})
	if err != nil {
		t.Fatal(err)
	}
	f, r := decodeAM(t, firing), decodeAM(t, resolved)

	if f.Status != "firing" || r.Status != "resolved" {
		t.Errorf("derived statuses = %q, %q; want firing, resolved", f.Status, r.Status)
	}
	ra := r.Alerts[0]
	if ra.Status != "resolved" || ra.EndsAt != "2026-03-01T02:10:00Z" {
		t.Errorf("resolved alert status, endsAt = %q, %q", ra.Status, ra.EndsAt)
	}
	if ra.StartsAt != f.Alerts[0].StartsAt {
		t.Errorf("startsAt changed from %q to %q", f.Alerts[0].StartsAt, ra.StartsAt)
	}
	if ra.Labels["severity"] != "fatal" {
		t.Errorf("resolved severity = %q, want the alert's level", ra.Labels["severity"])
	}
	if ra.Fingerprint != f.Alerts[0].Fingerprint || r.GroupKey != f.GroupKey {
		t.Errorf("identity changed: fingerprint %s -> %s, groupKey %s -> %s", f.Alerts[0].Fingerprint, ra.Fingerprint, f.GroupKey, r.GroupKey)
	}
}

func TestAlertmanagerWithoutAlert(t *testing.T) {
	cfg := apihook.Config{Format: "alertmanager"}
	body, err := apihook.Body(cfg, apihook.Payload{Key: "k", Rule: "r", Events: []*unyov1.Event{success("ev-2", "web1", t0)}})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeAM(t, body)
	a := m.Alerts[0]
	if _, ok := a.Labels["severity"]; ok {
		t.Errorf("a success event without an alert got severity %q", a.Labels["severity"])
	}
	if _, ok := a.Annotations["alert_id"]; ok {
		t.Error("alert_id annotation without an alert")
	}
	if _, ok := a.Annotations["description"]; ok {
		t.Error("empty description annotation not left out")
	}
	if a.StartsAt != "2026-03-01T02:00:00Z" || a.EndsAt != "2026-03-01T02:00:00Z" {
		t.Errorf("startsAt, endsAt = %q, %q; want the event's time", a.StartsAt, a.EndsAt)
	}
	if m.ExternalURL != "" || a.GeneratorURL != "" {
		t.Errorf("URLs without Config.ExternalURL: %q, %q", m.ExternalURL, a.GeneratorURL)
	}

	body, err = apihook.Body(cfg, apihook.Payload{Key: "k", Rule: "r", Events: []*unyov1.Event{critical("ev-1", "web1", t0)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeAM(t, body).Alerts[0].Labels["severity"]; got != "critical" {
		t.Errorf("severity without an alert = %q, want the event's level", got)
	}
}

func TestAlertmanagerGroup(t *testing.T) {
	e1, e2 := critical("ev-1", "web1", t0), critical("ev-2", "web2", t0.Add(time.Second))
	e2.Output = "DISK CRITICAL - / 99% used"
	e3 := success("ev-3", "web3", t0)
	body, err := apihook.Body(apihook.Config{Format: "alertmanager"}, apihook.Payload{
		Key: "disk-group:g1", Rule: "disk-group", Events: []*unyov1.Event{e1, e2, e3},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeAM(t, body)
	if len(m.Alerts) != 3 {
		t.Fatalf("%d alerts, want one per event", len(m.Alerts))
	}
	if m.Status != "firing" {
		t.Errorf("status = %q, want firing while a member fires", m.Status)
	}
	var statuses, nodes []string
	for _, a := range m.Alerts {
		statuses = append(statuses, a.Status)
		nodes = append(nodes, a.Labels["node"])
	}
	if !slices.Equal(statuses, []string{"firing", "firing", "resolved"}) || !slices.Equal(nodes, []string{"web1", "web2", "web3"}) {
		t.Errorf("alerts: statuses %v, nodes %v", statuses, nodes)
	}
	if want := map[string]string{"alertname": "disk", "cluster": "tokyo", "rack": "r12"}; !maps.Equal(m.CommonLabels, want) {
		t.Errorf("commonLabels = %v, want %v", m.CommonLabels, want)
	}
	if want := map[string]string{"alertname": "disk", "cluster": "tokyo", "rack": "r12"}; !maps.Equal(m.GroupLabels, want) {
		t.Errorf("groupLabels = %v, want %v", m.GroupLabels, want)
	}
	if len(m.CommonAnnotations) != 0 {
		t.Errorf("commonAnnotations = %v, want none in common", m.CommonAnnotations)
	}
	if m.Alerts[0].Fingerprint == m.Alerts[1].Fingerprint {
		t.Error("alerts of different nodes share a fingerprint")
	}
}

func TestUnyoFormat(t *testing.T) {
	e := critical("ev-1", "web1", t0)
	a := openAlert(e)
	body, err := apihook.Body(apihook.Config{}, apihook.Payload{Key: "disk-page:ev-1", Rule: "disk-page", Events: []*unyov1.Event{e}, Alert: a, Status: "firing"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version, Key, Rule, Cluster, Status string
		Events                              []json.RawMessage
		Alert                               json.RawMessage
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if got.Version != "unyo.v1" || got.Key != "disk-page:ev-1" || got.Rule != "disk-page" || got.Cluster != "tokyo" || got.Status != "firing" {
		t.Errorf("envelope = %+v", got)
	}
	if len(got.Events) != 1 {
		t.Fatalf("%d events, want 1", len(got.Events))
	}
	var ev unyov1.Event
	if err := protojson.Unmarshal(got.Events[0], &ev); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&ev, e) {
		t.Errorf("event round trip:\n got %v\nwant %v", &ev, e)
	}
	if !bytes.Contains(got.Events[0], []byte(`"long_output"`)) || !bytes.Contains(got.Events[0], []byte(`"LEVEL_CRITICAL"`)) {
		t.Errorf("events not in proto names with enum names: %s", got.Events[0])
	}
	var al unyov1.Alert
	if err := protojson.Unmarshal(got.Alert, &al); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&al, a) {
		t.Errorf("alert round trip:\n got %v\nwant %v", &al, a)
	}

	// Without an alert the key is absent, and the status is derived.
	body, err = apihook.Body(apihook.Config{Format: "unyo"}, apihook.Payload{Key: "k", Rule: "r", Events: []*unyov1.Event{success("ev-2", "web1", t0)}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["alert"]; ok {
		t.Errorf("alert present without an alert: %s", body)
	}
	if string(m["status"]) != `"resolved"` {
		t.Errorf("status = %s, want resolved for success events", m["status"])
	}
}

func TestBodyErrors(t *testing.T) {
	ev := []*unyov1.Event{critical("ev-1", "web1", t0)}
	tests := []struct {
		name string
		cfg  apihook.Config
		p    apihook.Payload
		want string
	}{
		{"no rule", apihook.Config{}, apihook.Payload{Key: "k", Events: ev}, "the payload names no rule"},
		{"no events", apihook.Config{}, apihook.Payload{Key: "k", Rule: "r"}, "the payload has no events"},
		{"nil event", apihook.Config{}, apihook.Payload{Key: "k", Rule: "r", Events: []*unyov1.Event{nil}}, "nil event"},
		{"status", apihook.Config{}, apihook.Payload{Key: "k", Rule: "r", Events: ev, Status: "ok"}, `payload status must be "firing" or "resolved", got "ok"`},
		{"format", apihook.Config{Format: "slack"}, apihook.Payload{Key: "k", Rule: "r", Events: ev}, `unknown api_hook format "slack"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := apihook.Body(tt.cfg, tt.p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestAlertmanagerResolvedWithoutAlert: a resolved notification sent by a
// rule without alert actions still says when the problem began (before it
// ended) and how severe it was, from what the pipeline notified.
func TestAlertmanagerResolvedWithoutAlert(t *testing.T) {
	se := success("ev-2", "web1", t0.Add(10*time.Minute))
	body, err := apihook.Body(apihook.Config{Format: "alertmanager"}, apihook.Payload{
		Key: "page/ev-2/0", Rule: "page", Events: []*unyov1.Event{se}, Status: "resolved",
		Since: t0, Level: unyov1.Level_LEVEL_CRITICAL,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := decodeAM(t, body).Alerts[0]
	if a.Status != "resolved" || a.StartsAt != "2026-03-01T02:00:00Z" || a.EndsAt != "2026-03-01T02:10:00Z" {
		t.Errorf("status %q, startsAt %q, endsAt %q: want resolved, the firing's start, the recovery", a.Status, a.StartsAt, a.EndsAt)
	}
	if a.Labels["severity"] != "critical" {
		t.Errorf("severity = %q, want the level last notified", a.Labels["severity"])
	}
}

// TestAlertmanagerPush: format alertmanager_push is a JSON array of
// PostableAlerts (as Alertmanager's API v2 takes them): firing alerts are
// valid for four resend intervals from when the check ran, resolved ones
// end when the clearing check ran, and a level change resolves the alert
// of the previous severity in the same request.
func TestAlertmanagerPush(t *testing.T) {
	warn := critical("e2", "web1", t0.Add(time.Minute))
	warn.Level = unyov1.Level_LEVEL_WARNING
	tests := []struct {
		name   string
		cfg    apihook.Config
		p      apihook.Payload
		want   []string // "severity endsAt" per alert
		starts time.Time
	}{
		{"firing, default resend", apihook.Config{}, apihook.Payload{Events: []*unyov1.Event{critical("e1", "web1", t0)}},
			[]string{"critical " + t0.Add(4*time.Minute).Format(time.RFC3339)}, t0},
		{"firing, resend 10s", apihook.Config{ResendInterval: 10 * time.Second}, apihook.Payload{Events: []*unyov1.Event{critical("e1", "web1", t0)}},
			[]string{"critical " + t0.Add(40*time.Second).Format(time.RFC3339)}, t0},
		{"resolved", apihook.Config{}, apihook.Payload{Events: []*unyov1.Event{success("e3", "web1", t0.Add(2*time.Minute))}, Since: t0, Level: unyov1.Level_LEVEL_CRITICAL},
			[]string{"critical " + t0.Add(2*time.Minute).Format(time.RFC3339)}, t0},
		{"level change resolves the old severity", apihook.Config{}, apihook.Payload{Events: []*unyov1.Event{warn}, Since: t0, Level: unyov1.Level_LEVEL_CRITICAL},
			[]string{"critical " + t0.Add(time.Minute).Format(time.RFC3339), "warning " + t0.Add(5*time.Minute).Format(time.RFC3339)}, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Format = apihook.FormatAlertmanagerPush
			tt.cfg.ExternalURL = "https://unyo.example/console"
			tt.p.Rule, tt.p.Key = "page", "page/e/0"
			b, err := apihook.Body(tt.cfg, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			// PostableAlert as Alertmanager's OpenAPI spec declares it.
			var got []struct {
				Labels       map[string]string `json:"labels"`
				Annotations  map[string]string `json:"annotations"`
				StartsAt     time.Time         `json:"startsAt"`
				EndsAt       time.Time         `json:"endsAt"`
				GeneratorURL string            `json:"generatorURL"`
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			var summary []string
			for _, a := range got {
				summary = append(summary, a.Labels["severity"]+" "+a.EndsAt.Format(time.RFC3339))
				if a.Labels["alertname"] != "disk" || a.Labels["node"] != "web1" || a.Labels["cluster"] != "tokyo" || a.Labels["rack"] != "r12" {
					t.Errorf("labels %v", a.Labels)
				}
				if !a.StartsAt.Equal(tt.starts) || a.GeneratorURL != tt.cfg.ExternalURL || a.Annotations["summary"] == "" {
					t.Errorf("alert %+v", a)
				}
			}
			if !slices.Equal(summary, tt.want) {
				t.Errorf("got %q, want %q\n%s", summary, tt.want, b)
			}
		})
	}
}
