package amapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
)

// Options configures the API.
type Options struct {
	// Local serves the server's connect procedures (with their
	// authentication); the API calls them in process.
	Local http.Handler
	// Name is the server's name in /api/v2/status (cluster.name).
	Name    string
	Version string
	Now     func() time.Time
	Logger  *slog.Logger
}

// Handler serves /api/v2/.
type Handler struct {
	opts    Options
	alerts  unyov1connect.AlertServiceClient
	events  unyov1connect.EventServiceClient
	objects unyov1connect.ObjectServiceClient
	mux     *http.ServeMux
	started time.Time
}

// New returns the API handler; mount it at /api/v2/.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	hc := &http.Client{Transport: inProcess{opts.Local}}
	h := &Handler{
		opts:    opts,
		alerts:  unyov1connect.NewAlertServiceClient(hc, "http://in-process"),
		events:  unyov1connect.NewEventServiceClient(hc, "http://in-process"),
		objects: unyov1connect.NewObjectServiceClient(hc, "http://in-process"),
		mux:     http.NewServeMux(),
		started: opts.Now(),
	}
	h.mux.HandleFunc("GET /api/v2/alerts", h.getAlerts)
	h.mux.HandleFunc("POST /api/v2/alerts", func(w http.ResponseWriter, _ *http.Request) {
		apiError(w, http.StatusBadRequest, errors.New("unyo takes events from its agents, not alerts; use an api_hook of format alertmanager_push to send unyo's alerts to an Alertmanager"))
	})
	h.mux.HandleFunc("GET /api/v2/alerts/groups", h.getGroups)
	h.mux.HandleFunc("GET /api/v2/silences", h.getSilences)
	h.mux.HandleFunc("POST /api/v2/silences", h.postSilence)
	h.mux.HandleFunc("GET /api/v2/silence/{id}", h.getSilence)
	h.mux.HandleFunc("DELETE /api/v2/silence/{id}", h.deleteSilence)
	h.mux.HandleFunc("GET /api/v2/receivers", h.getReceivers)
	h.mux.HandleFunc("GET /api/v2/status", h.getStatus)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// ----- in-process calls

type callerKey struct{}

// withCaller carries the caller's request to the in-process call, so that
// it is authenticated as the caller: its Authorization header, address and
// TLS state (a client certificate is a credential too).
func withCaller(r *http.Request) context.Context {
	return context.WithValue(r.Context(), callerKey{}, r)
}

// inProcess is a RoundTripper that serves requests with a handler.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	caller, _ := req.Context().Value(callerKey{}).(*http.Request)
	if caller == nil {
		return nil, errors.New("amapi: an in-process call without its caller")
	}
	if a := caller.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	req.RemoteAddr, req.TLS = caller.RemoteAddr, caller.TLS
	req.RequestURI = req.URL.RequestURI()
	w := &recorder{header: http.Header{}, code: http.StatusOK}
	t.h.ServeHTTP(w, req)
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

type recorder struct {
	header http.Header
	body   bytes.Buffer
	code   int
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}
func (r *recorder) Write(b []byte) (int, error) { r.wrote = true; return r.body.Write(b) }
func (r *recorder) Flush()                      {}

// ----- responses

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers as Alertmanager does: a JSON string with the message.
func apiError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(err.Error())
}

// callError answers an in-process call's error with its HTTP status.
func callError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		code = http.StatusUnauthorized
	case connect.CodePermissionDenied:
		code = http.StatusForbidden
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		code = http.StatusBadRequest
	case connect.CodeNotFound:
		code = http.StatusNotFound
	case connect.CodeUnavailable:
		code = http.StatusServiceUnavailable
	}
	if ce := new(connect.Error); errors.As(err, &ce) {
		err = errors.New(ce.Message())
	}
	apiError(w, code, err)
}

// ----- alerts

type receiver struct {
	Name string `json:"name"`
}

type alertStatus struct {
	State       string   `json:"state"`
	SilencedBy  []string `json:"silencedBy"`
	InhibitedBy []string `json:"inhibitedBy"`
	MutedBy     []string `json:"mutedBy"`
}

// gettableAlert is Alertmanager's GettableAlert.
type gettableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
	Receivers    []receiver        `json:"receivers"`
	Status       alertStatus       `json:"status"`
}

// gettable is a as Alertmanager shows it. silencedBy is what silenced
// the alert's latest result (see silencers); an alert silenced or
// acknowledged is "suppressed".
func gettable(a *unyov1.Alert, silencedBy []string) gettableAlert {
	labels := map[string]string{
		"alertname": a.GetCheck(), "node": a.GetNode(), "cluster": a.GetCluster(),
		"severity": a.GetLevel().Name(), "rule": a.GetRule(),
	}
	annotations := map[string]string{"summary": a.GetSummary(), "alert_id": a.GetId()}
	for _, m := range []map[string]string{labels, annotations} {
		for k, v := range m {
			if v == "" {
				delete(m, k)
			}
		}
	}
	state := "active"
	if a.GetState() == unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED || len(silencedBy) > 0 {
		state = "suppressed"
	}
	if silencedBy == nil {
		silencedBy = []string{} // Alertmanager writes [], never null
	}
	return gettableAlert{
		Labels: labels, Annotations: annotations,
		StartsAt: a.GetFirstSeen().AsTime(), UpdatedAt: a.GetLastSeen().AsTime(),
		Fingerprint: a.GetId(), Receivers: []receiver{{Name: a.GetRule()}},
		Status: alertStatus{State: state, SilencedBy: silencedBy, InhibitedBy: []string{}, MutedBy: []string{}},
	}
}

// silencers returns, by cluster/node/check, what silenced the latest
// result of each node and check, as the pipeline marked it: a silence
// rule by its name (a silence's id, as amtool shows it), a maintenance as
// "maintenance:NAME". An alert whose latest result was silenced is
// silenced, as in Alertmanager an alert a silence matches now is; it gets
// no notification while so.
func (h *Handler) silencers(r *http.Request) (map[string][]string, error) {
	resp, err := h.events.ListEvents(withCaller(r), connect.NewRequest(&unyov1.ListEventsRequest{}))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range resp.Msg.GetEvents() {
		by := e.GetSilencedBy()
		if by == "" {
			continue
		}
		out[e.GetCluster()+"/"+e.GetNode()+"/"+e.GetCheck()] = []string{strings.TrimPrefix(by, "rule:")}
	}
	return out, nil
}

// boolParam reads an Alertmanager boolean query parameter with its default.
func boolParam(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("parameter %s: %q is not true or false", name, v)
	}
	return b, nil
}

// listAlerts returns the alerts the request's parameters select.
func (h *Handler) listAlerts(r *http.Request) ([]gettableAlert, int, error) {
	q := r.URL.Query()
	filters, err := parseFilters(q["filter"])
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	var recv *regexp.Regexp
	if s := q.Get("receiver"); s != "" {
		if recv, err = regexp.Compile("^(?:" + s + ")$"); err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("parameter receiver: %w", err)
		}
	}
	active, err := boolParam(r, "active", true)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	// unyo's acknowledged alerts and those whose latest result a silence
	// rule or maintenance silenced are Alertmanager's suppressed ones:
	// shown with silenced=true (the default), as amtool shows silenced
	// alerts only when asked.
	silenced, err := boolParam(r, "silenced", true)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	for _, p := range []string{"inhibited", "unprocessed"} {
		if _, err := boolParam(r, p, true); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	out := []gettableAlert{}
	if !active && !silenced {
		return out, 0, nil
	}
	// An open alert may be silenced, so both states are read whichever
	// the parameters ask for; the status decides.
	req := &unyov1.ListAlertsRequest{States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED}}
	resp, err := h.alerts.ListAlerts(withCaller(r), connect.NewRequest(req))
	if err != nil {
		return nil, 0, err
	}
	for _, ce := range resp.Msg.GetClusterErrors() {
		h.opts.Logger.Warn("Alertmanager API: a cluster's alerts are missing", "cluster", ce.GetCluster(), "err", ce.GetError())
	}
	var silencers map[string][]string
	if len(resp.Msg.GetAlerts()) > 0 {
		if silencers, err = h.silencers(r); err != nil {
			return nil, 0, err
		}
	}
	for _, a := range resp.Msg.GetAlerts() {
		g := gettable(a, silencers[a.GetCluster()+"/"+a.GetNode()+"/"+a.GetCheck()])
		if suppressed := g.Status.State == "suppressed"; (suppressed && !silenced) || (!suppressed && !active) {
			continue
		}
		if !matchAll(filters, g.Labels) || (recv != nil && !recv.MatchString(a.GetRule())) {
			continue
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b gettableAlert) int { return a.StartsAt.Compare(b.StartsAt) })
	return out, 0, nil
}

func (h *Handler) getAlerts(w http.ResponseWriter, r *http.Request) {
	as, code, err := h.listAlerts(r)
	switch {
	case code != 0:
		apiError(w, code, err)
	case err != nil:
		callError(w, err)
	default:
		writeJSON(w, as)
	}
}

type alertGroup struct {
	Labels   map[string]string `json:"labels"`
	Receiver receiver          `json:"receiver"`
	Alerts   []gettableAlert   `json:"alerts"`
}

// getGroups groups by receiver (the rule) and alertname, as a route with
// group_by: [alertname] would.
func (h *Handler) getGroups(w http.ResponseWriter, r *http.Request) {
	as, code, err := h.listAlerts(r)
	switch {
	case code != 0:
		apiError(w, code, err)
		return
	case err != nil:
		callError(w, err)
		return
	}
	groups := []alertGroup{}
	index := map[[2]string]int{}
	for _, a := range as {
		k := [2]string{a.Receivers[0].Name, a.Labels["alertname"]}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, alertGroup{Labels: map[string]string{"alertname": k[1]}, Receiver: receiver{Name: k[0]}})
		}
		groups[i].Alerts = append(groups[i].Alerts, a)
	}
	writeJSON(w, groups)
}

func (h *Handler) getReceivers(w http.ResponseWriter, r *http.Request) {
	rules, err := h.rules(r)
	if err != nil {
		callError(w, err)
		return
	}
	out := []receiver{}
	for _, er := range rules {
		if er.GetSpec().GetType() == "action" {
			out = append(out, receiver{Name: er.GetName()})
		}
	}
	writeJSON(w, out)
}

// ----- status

func (h *Handler) getStatus(w http.ResponseWriter, r *http.Request) {
	// Authenticated like the rest: a one-alert listing checks the
	// caller's token as every other call does.
	if _, err := h.alerts.ListAlerts(withCaller(r), connect.NewRequest(&unyov1.ListAlertsRequest{Limit: 1})); err != nil {
		callError(w, err)
		return
	}
	writeJSON(w, map[string]any{
		"cluster": map[string]any{"name": h.opts.Name, "status": "ready", "peers": []any{}},
		"versionInfo": map[string]string{
			"version": h.opts.Version, "revision": "", "branch": "", "buildUser": "unyo",
			"buildDate": "", "goVersion": runtime.Version(),
		},
		"config": map[string]string{"original": "# unyo: routing is done by event rules\n"},
		"uptime": h.started,
	})
}

// ----- silences

// silence is Alertmanager's GettableSilence; PostableSilence is the same
// without status and updatedAt.
type silence struct {
	ID     string `json:"id,omitempty"`
	Status *struct {
		State string `json:"state"`
	} `json:"status,omitempty"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
}

// rules lists the event rules the caller may see.
func (h *Handler) rules(r *http.Request) ([]*unyov1.EventRule, error) {
	resp, err := h.objects.List(withCaller(r), connect.NewRequest(&unyov1.ListRequest{Kind: "EventRule"}))
	if err != nil {
		return nil, err
	}
	// Root lists a rule it keeps for every cluster once per cluster.
	var out []*unyov1.EventRule
	seen := map[string]bool{}
	for _, o := range resp.Msg.GetObjects() {
		if er := o.GetEventRule(); er != nil && !seen[er.GetName()] {
			seen[er.GetName()] = true
			out = append(out, er)
		}
	}
	return out, nil
}

func (h *Handler) getSilences(w http.ResponseWriter, r *http.Request) {
	filters, err := parseFilters(r.URL.Query()["filter"])
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	rules, err := h.rules(r)
	if err != nil {
		callError(w, err)
		return
	}
	out := []silence{}
	for _, er := range rules {
		if er.GetSpec().GetType() != "silence" {
			continue
		}
		s := h.silenceOf(er)
		if !silenceMatches(filters, s) {
			continue
		}
		out = append(out, s)
	}
	writeJSON(w, out)
}

// silenceMatches is Alertmanager's filter on silences: every filter
// matcher must equal one of the silence's matchers' name and value.
func silenceMatches(fs []matcher, s silence) bool {
	for _, f := range fs {
		if !slices.ContainsFunc(s.Matchers, func(m Matcher) bool { return m.Name == f.name && f.matches(map[string]string{f.name: m.Value}) }) {
			return false
		}
	}
	return true
}

func (h *Handler) getSilence(w http.ResponseWriter, r *http.Request) {
	rules, err := h.rules(r)
	if err != nil {
		callError(w, err)
		return
	}
	id := r.PathValue("id")
	for _, er := range rules {
		if er.GetName() == id && er.GetSpec().GetType() == "silence" {
			writeJSON(w, h.silenceOf(er))
			return
		}
	}
	apiError(w, http.StatusNotFound, fmt.Errorf("no silence %s", id))
}

func (h *Handler) silenceOf(er *unyov1.EventRule) silence {
	sp := er.GetSpec()
	m := sp.GetMatch()
	s := silence{ID: er.GetName(), CreatedBy: sp.GetOwner(), Comment: sp.GetReason(), Matchers: []Matcher{}}
	s.Status = &struct {
		State string `json:"state"`
	}{State: "active"}
	if er.GetCreatedAt() != nil {
		s.StartsAt = er.GetCreatedAt().AsTime()
	}
	if er.GetUpdatedAt() != nil {
		s.UpdatedAt = er.GetUpdatedAt().AsTime()
	}
	if u, err := time.Parse(time.RFC3339, sp.GetUntil()); err == nil {
		s.EndsAt = u
		if !u.After(h.opts.Now()) {
			s.Status.State = "expired"
		}
	}
	regexMatcher := func(name, re string) {
		if re == "" {
			return
		}
		// A quoted literal (what an equality matcher became) is shown
		// as the equality again.
		if p, err := syntax.Parse(re, syntax.Perl); err == nil && p.Op == syntax.OpLiteral && p.Flags&syntax.FoldCase == 0 {
			s.Matchers = append(s.Matchers, Matcher{Name: name, Value: string(p.Rune)})
			return
		}
		s.Matchers = append(s.Matchers, Matcher{Name: name, Value: re, IsRegex: true})
	}
	regexMatcher("alertname", m.GetCheck())
	regexMatcher("node", m.GetNode())
	if c := er.GetCluster(); c != "" {
		s.Matchers = append(s.Matchers, Matcher{Name: "cluster", Value: c})
	}
	switch lv := m.GetLevels(); len(lv) {
	case 0:
	case 1:
		s.Matchers = append(s.Matchers, Matcher{Name: "severity", Value: lv[0]})
	default:
		s.Matchers = append(s.Matchers, Matcher{Name: "severity", Value: strings.Join(lv, "|"), IsRegex: true})
	}
	for _, k := range slices.Sorted(mapsKeys(m.GetLabels())) {
		s.Matchers = append(s.Matchers, Matcher{Name: k, Value: m.GetLabels()[k]})
	}
	return s
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ruleOf maps a posted silence onto a silence rule (see the package
// documentation); the error says what cannot be expressed.
func ruleOf(s silence, name string, now time.Time) (*unyov1.EventRule, error) {
	if len(s.Matchers) == 0 {
		return nil, errors.New("a silence needs at least one matcher")
	}
	if s.StartsAt.After(now.Add(time.Minute)) {
		return nil, errors.New("unyo silences start when they are created: startsAt must not be in the future")
	}
	if !s.EndsAt.After(now) {
		return nil, errors.New("endsAt must be in the future")
	}
	if strings.TrimSpace(s.CreatedBy) == "" || strings.TrimSpace(s.Comment) == "" {
		return nil, errors.New("a silence needs createdBy and comment: unyo silence rules name their owner and reason")
	}
	m := &unyov1.EventMatch{}
	er := &unyov1.EventRule{Name: name, Labels: map[string]string{"unyo.dev/created-by": "alertmanager-api"},
		Spec: &unyov1.EventRuleSpec{Type: "silence", Match: m, Owner: s.CreatedBy, Reason: s.Comment, Until: s.EndsAt.UTC().Format(time.RFC3339)}}
	for _, mt := range s.Matchers {
		if !mt.equal() {
			return nil, fmt.Errorf("matcher %s: negative matchers cannot be expressed as an unyo silence rule", mt.Name)
		}
		value := mt.Value
		if !mt.IsRegex {
			value = regexp.QuoteMeta(value)
		}
		switch mt.Name {
		case "alertname":
			m.Check = value
		case "node":
			m.Node = value
		case "cluster", "severity":
			if mt.IsRegex {
				return nil, fmt.Errorf("matcher %s: only equality (%s=value) is supported", mt.Name, mt.Name)
			}
			if mt.Name == "cluster" {
				er.Cluster = mt.Value
			} else {
				m.Levels = append(m.Levels, mt.Value)
			}
		default:
			if mt.IsRegex {
				return nil, fmt.Errorf("matcher %s: regular expressions are supported on alertname and node only", mt.Name)
			}
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[mt.Name] = mt.Value
		}
	}
	return er, nil
}

func (h *Handler) postSilence(w http.ResponseWriter, r *http.Request) {
	var s silence
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&s); err != nil {
		apiError(w, http.StatusBadRequest, fmt.Errorf("decoding the silence: %w", err))
		return
	}
	name := s.ID
	if name == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name = "am-" + hex.EncodeToString(b[:])
	}
	er, err := ruleOf(s, name, h.opts.Now())
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	_, err = h.objects.Apply(withCaller(r), connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{{Kind: &unyov1.Object_EventRule{EventRule: er}}}}))
	if err != nil {
		callError(w, err)
		return
	}
	writeJSON(w, map[string]string{"silenceID": name})
}

// deleteSilence expires a silence: its rule is deleted.
func (h *Handler) deleteSilence(w http.ResponseWriter, r *http.Request) {
	rules, err := h.rules(r)
	if err != nil {
		callError(w, err)
		return
	}
	id := r.PathValue("id")
	i := slices.IndexFunc(rules, func(er *unyov1.EventRule) bool { return er.GetName() == id && er.GetSpec().GetType() == "silence" })
	if i < 0 {
		apiError(w, http.StatusNotFound, fmt.Errorf("no silence %s", id))
		return
	}
	ref := &unyov1.ObjectRef{Kind: "EventRule", Name: id, Cluster: rules[i].GetCluster()}
	if _, err := h.objects.Delete(withCaller(r), connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{ref}})); err != nil {
		callError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
