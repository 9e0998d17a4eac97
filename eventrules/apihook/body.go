package apihook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Payload statuses.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Payload is what one delivery is about.
type Payload struct {
	// Key identifies this delivery, sent as the Idempotency-Key header and
	// the unyo format's "key": the rule and the event id, or the rule and
	// the aggregate group's key. Retries of one delivery reuse it; a later
	// notification (the same problem resolved, say) must use another.
	Key  string
	Rule string
	// Cluster defaults to the first event's.
	Cluster string
	// Events is one event, or the members of an aggregate group.
	Events []*unyov1.Event
	// Alert is the alert the rule also opened, fired or resolved; may be
	// nil.
	Alert *unyov1.Alert
	// Status is StatusFiring or StatusResolved; empty means resolved when
	// every event is a success and firing otherwise.
	Status string
	// Since is when the condition began firing, as the receiver was told
	// (zero: unknown), and Level the firing level last notified. Without
	// an alert they give a resolved notification its startsAt and
	// severity; the event alone (a success) has neither.
	Since time.Time
	Level unyov1.Level
}

// Body renders the request body in cfg's format. See the package
// documentation for both formats.
func Body(cfg Config, p Payload) ([]byte, error) {
	if p.Rule == "" {
		return nil, errors.New("the payload names no rule")
	}
	if len(p.Events) == 0 {
		return nil, errors.New("the payload has no events")
	}
	if slices.Contains(p.Events, nil) {
		return nil, errors.New("the payload has a nil event")
	}
	switch p.Status {
	case "":
		p.Status = StatusResolved
		if slices.ContainsFunc(p.Events, firing) {
			p.Status = StatusFiring
		}
	case StatusFiring, StatusResolved:
	default:
		return nil, fmt.Errorf(`payload status must be %q or %q, got %q`, StatusFiring, StatusResolved, p.Status)
	}
	if p.Cluster == "" {
		p.Cluster = p.Events[0].GetCluster()
	}
	switch cfg.Format {
	case "", FormatUnyo:
		return unyoBody(p)
	case FormatAlertmanager:
		return alertmanagerBody(cfg, p), nil
	case FormatAlertmanagerPush:
		return alertmanagerPushBody(cfg, p), nil
	}
	return nil, fmt.Errorf(`unknown api_hook format %q: expected "unyo", "alertmanager" or "alertmanager_push"`, cfg.Format)
}

func firing(e *unyov1.Event) bool { return e.GetLevel() != unyov1.Level_LEVEL_SUCCESS }

// marshal encodes without escaping <, > and &, which check output often
// holds ("load > 5") and which receivers would otherwise see as \u003e.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only maps, strings, times and valid RawMessages are encoded.
		panic("apihook: encoding a payload: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// ----- the unyo format

// Version is the unyo format's "version"; it changes only when a field
// changes meaning or goes away.
const Version = "unyo.v1"

type unyoPayload struct {
	Version string            `json:"version"`
	Key     string            `json:"key"`
	Rule    string            `json:"rule"`
	Cluster string            `json:"cluster"`
	Status  string            `json:"status"`
	Events  []json.RawMessage `json:"events"`
	Alert   json.RawMessage   `json:"alert,omitempty"`
}

func unyoBody(p Payload) ([]byte, error) {
	// The proto field names match the schema operators write rules in,
	// and are what the JSON API returns.
	opts := protojson.MarshalOptions{UseProtoNames: true}
	out := unyoPayload{Version: Version, Key: p.Key, Rule: p.Rule, Cluster: p.Cluster, Status: p.Status}
	for _, e := range p.Events {
		b, err := opts.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encoding event %s: %w", e.GetId(), err)
		}
		out.Events = append(out.Events, b)
	}
	if p.Alert != nil {
		b, err := opts.Marshal(p.Alert)
		if err != nil {
			return nil, fmt.Errorf("encoding alert %s: %w", p.Alert.GetId(), err)
		}
		out.Alert = b
	}
	return marshal(out), nil
}

// ----- the Alertmanager format

// amMessage is Alertmanager's webhook message (notify/webhook.Message with
// its embedded template.Data), fields in Alertmanager's order.
type amMessage struct {
	Receiver          string            `json:"receiver"`
	Status            string            `json:"status"`
	Alerts            []amAlert         `json:"alerts"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   uint64            `json:"truncatedAlerts"`
}

type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

func alertmanagerBody(cfg Config, p Payload) []byte {
	m := amMessage{
		Receiver:    p.Rule,
		Status:      p.Status,
		ExternalURL: cfg.ExternalURL,
		Version:     "4",
	}
	for _, e := range p.Events {
		m.Alerts = append(m.Alerts, amAlertOf(cfg, p, e))
	}
	m.CommonLabels = common(m.Alerts, func(a amAlert) map[string]string { return a.Labels })
	m.CommonAnnotations = common(m.Alerts, func(a amAlert) map[string]string { return a.Annotations })
	// The group is what the alerts share apart from severity, so that the
	// notifications of one problem keep one groupKey as it escalates and
	// resolves; receivers such as PagerDuty adapters dedup on groupKey.
	m.GroupLabels = maps.Clone(m.CommonLabels)
	delete(m.GroupLabels, "severity")
	m.GroupKey = fmt.Sprintf("{}/{rule=%s}:%s", strconv.Quote(p.Rule), labelString(m.GroupLabels))
	return marshal(m)
}

func amAlertOf(cfg Config, p Payload, e *unyov1.Event) amAlert {
	labels := make(map[string]string, len(e.GetLabels())+4)
	maps.Copy(labels, e.GetLabels())
	// unyo's own labels win over node labels of the same name.
	cluster := e.GetCluster()
	if cluster == "" {
		cluster = p.Cluster
	}
	labels["alertname"] = e.GetCheck()
	labels["node"] = e.GetNode()
	labels["cluster"] = cluster
	labels["severity"] = severity(p, e)
	// As in Prometheus, an empty label value is no label.
	maps.DeleteFunc(labels, func(_, v string) bool { return v == "" })

	annotations := map[string]string{
		"summary":     e.GetOutput(),
		"description": e.GetLongOutput(),
		"event_id":    e.GetId(),
	}
	if p.Alert != nil {
		annotations["alert_id"] = p.Alert.GetId()
	}
	maps.DeleteFunc(annotations, func(_, v string) bool { return v == "" })

	a := amAlert{
		Status:       StatusFiring,
		Labels:       labels,
		Annotations:  annotations,
		StartsAt:     eventTime(e),
		GeneratorURL: cfg.ExternalURL,
		Fingerprint:  fingerprint(labels, "severity"),
	}
	switch {
	case p.Alert.GetFirstSeen() != nil:
		a.StartsAt = p.Alert.GetFirstSeen().AsTime()
	case !p.Since.IsZero():
		a.StartsAt = p.Since
	}
	// endsAt stays the zero time while firing, as Alertmanager sends it.
	if p.Status == StatusResolved || !firing(e) {
		a.Status = StatusResolved
		a.EndsAt = eventTime(e)
	}
	return a
}

// ----- the Alertmanager push format

// postableAlert is Alertmanager's PostableAlert (API v2), which Prometheus
// posts to /api/v2/alerts.
type postableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// alertmanagerPushBody is the JSON array of PostableAlerts: each event's
// alert as the webhook format has it, firing with an endsAt ValidResends
// resend intervals after the check ran (so that Alertmanager resolves it
// if unyo stops sending), or resolved with endsAt when the clearing check
// ran. When the level changed since the last notification (Payload.Level),
// the alert of the previous severity, which Alertmanager holds as another
// alert, is resolved in the same request.
func alertmanagerPushBody(cfg Config, p Payload) []byte {
	resend := cfg.ResendInterval
	if resend <= 0 {
		resend = DefaultResendInterval
	}
	out := make([]postableAlert, 0, len(p.Events))
	for _, e := range p.Events {
		a := amAlertOf(cfg, p, e)
		pa := postableAlert{Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, EndsAt: a.EndsAt, GeneratorURL: a.GeneratorURL}
		if a.Status == StatusFiring {
			pa.EndsAt = eventTime(e).Add(ValidResends * resend)
			if prev := p.Level; prev.Name() != a.Labels["severity"] && (prev == unyov1.Level_LEVEL_WARNING || prev == unyov1.Level_LEVEL_CRITICAL) {
				old := postableAlert{Labels: maps.Clone(a.Labels), Annotations: a.Annotations, StartsAt: a.StartsAt, EndsAt: eventTime(e), GeneratorURL: a.GeneratorURL}
				old.Labels["severity"] = prev.Name()
				out = append(out, old)
			}
		}
		out = append(out, pa)
	}
	return marshal(out)
}

// severity is the alert's level when there is an alert, so that it stays
// the same on the resolved notification; else the event's level, else (a
// success) the level last notified firing, and none when nothing fired.
func severity(p Payload, e *unyov1.Event) string {
	if l := p.Alert.GetLevel(); l != unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED {
		return l.Name()
	}
	for _, l := range []unyov1.Level{e.GetLevel(), p.Level} {
		switch l {
		case unyov1.Level_LEVEL_CRITICAL, unyov1.Level_LEVEL_WARNING:
			return l.Name()
		}
	}
	return ""
}

// eventTime is when the check ran, or else when the cluster received the
// result.
func eventTime(e *unyov1.Event) time.Time {
	switch {
	case e.GetStartedAt() != nil:
		return e.GetStartedAt().AsTime()
	case e.GetReceivedAt() != nil:
		return e.GetReceivedAt().AsTime()
	}
	return time.Time{}
}

// fingerprint is Prometheus' label set fingerprint (FNV-1a 64 over the
// names in order and their values, each followed by 0xff) of the labels
// other than without, printed as 16 hex digits as Alertmanager prints it.
// Body leaves severity out, unlike Alertmanager: one condition on one node
// then keeps one fingerprint while it moves between warning and critical
// and when it resolves, which is what receivers correlate on.
func fingerprint(labels map[string]string, without string) string {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k == without {
			continue
		}
		h.Write([]byte(k))
		h.Write([]byte{0xff})
		h.Write([]byte(labels[k]))
		h.Write([]byte{0xff})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// common is the name/value pairs every alert has, like Alertmanager's
// commonLabels and commonAnnotations. Never nil: Alertmanager sends {}.
func common(as []amAlert, field func(amAlert) map[string]string) map[string]string {
	out := map[string]string{}
	if len(as) == 0 {
		return out
	}
	maps.Copy(out, field(as[0]))
	for _, a := range as[1:] {
		kv := field(a)
		maps.DeleteFunc(out, func(k, v string) bool {
			w, ok := kv[k]
			return !ok || w != v
		})
	}
	return out
}

// labelString formats labels as Prometheus prints a label set:
// {a="1", b="2"}.
func labelString(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+strconv.Quote(labels[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
