package eventrules

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Defaults and limits of actions.
const (
	// DefaultKeyTemplate identifies an alert by node and check, so that a
	// repeat of the same problem refreshes one alert instead of opening more.
	DefaultKeyTemplate = "{{.Node}}/{{.Check}}"
	// DefaultSummaryTemplate is the plugin's first output line.
	DefaultSummaryTemplate = "{{.Output}}"
	// MaxRendered caps a rendered key or summary, in bytes; longer output is
	// cut at a UTF-8 boundary. A key or summary is a line, not a report.
	MaxRendered = 1024

	DefaultHookTimeout = 10 * time.Second
	// MaxHookTimeout bounds api_hook.timeout: a slow receiver must not hold
	// up the pipeline's action workers for longer.
	MaxHookTimeout     = 5 * time.Minute
	DefaultHookRetries = 3
	MaxHookRetries     = 20

	// DefaultRepeatInterval is how often a notification (api_hook or plugin
	// action) is sent again while its condition keeps firing at one level:
	// Alertmanager's default repeat_interval. MaxRepeatInterval bounds it.
	DefaultRepeatInterval = 4 * time.Hour
	MaxRepeatInterval     = 90 * 24 * time.Hour
	// EveryResult is repeat_interval 0: the action runs for every event
	// its rule matches, as a sink for every result rather than a
	// notification.
	EveryResult time.Duration = -1

	// Payload formats of api_hook.format.
	FormatUnyo         = "unyo"
	FormatAlertmanager = "alertmanager"
	// FormatAlertmanagerPush posts PostableAlerts to an Alertmanager's
	// /api/v2/alerts; its repeat_interval defaults to
	// DefaultPushRepeatInterval, since each push is valid for only a few
	// intervals (see apihook).
	FormatAlertmanagerPush = "alertmanager_push"
	// DefaultPushRepeatInterval is Prometheus' --rules.alert.resend-delay:
	// how often a firing alert is pushed to Alertmanager again.
	DefaultPushRepeatInterval = time.Minute
)

// ActionKind is which of the action's kinds is set.
type ActionKind int

const (
	ActionCreateAlert ActionKind = iota + 1
	ActionDeleteAlert
	ActionAPIHook
	ActionPlugin
)

// String is the kind's field name in the schema.
func (k ActionKind) String() string {
	switch k {
	case ActionCreateAlert:
		return "create_alert"
	case ActionDeleteAlert:
		return "delete_alert"
	case ActionAPIHook:
		return "api_hook"
	case ActionPlugin:
		return "plugin"
	}
	return "unknown"
}

// Action is a compiled action: Kind says which one of the pointers is set.
type Action struct {
	Kind        ActionKind
	CreateAlert *CreateAlert
	DeleteAlert *DeleteAlert
	APIHook     *APIHook
	Plugin      *PluginAction
}

// PluginAction runs the action plugin unyo-action-<Name> with Config as
// the action's params, through the actions outbox.
type PluginAction struct {
	Name   string
	Config *unyov1.PluginAction
	// RepeatInterval: see APIHook.RepeatInterval.
	RepeatInterval time.Duration
}

// RepeatInterval is how often a notifying action (api_hook, plugin) is
// sent again while its condition keeps firing (EveryResult: on every
// event); 0 for alert actions, which act on every event.
func (a Action) RepeatInterval() time.Duration {
	switch {
	case a.APIHook != nil:
		return a.APIHook.RepeatInterval
	case a.Plugin != nil:
		return a.Plugin.RepeatInterval
	}
	return 0
}

// CreateAlert opens an alert, or refreshes the open alert with the same key.
type CreateAlert struct {
	// level is the configured alert level; UNSPECIFIED means "from the
	// event".
	level        unyov1.AlertLevel
	key, summary *template.Template
	// defaultKey and defaultSummary: the templates are the defaults,
	// rendered without executing them (see defaultKey).
	defaultKey, defaultSummary bool
}

// Level is the alert's level: the configured one, or else derived from the
// event: critical -> CRITICAL, anything else -> WARNING. An alert is never
// FATAL unless a rule says so, because only an operator knows whether users
// are affected. A success event gets WARNING, not nothing, because a rule
// that explicitly creates an alert from a success event wants an alert.
func (a CreateAlert) Level(e *unyov1.Event) unyov1.AlertLevel {
	if a.level != unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED {
		return a.level
	}
	if e.GetLevel() == unyov1.Level_LEVEL_CRITICAL {
		return unyov1.AlertLevel_ALERT_LEVEL_CRITICAL
	}
	return unyov1.AlertLevel_ALERT_LEVEL_WARNING
}

// Key renders the deduplication key for the event.
func (a CreateAlert) Key(e *unyov1.Event) (string, error) {
	if a.defaultKey {
		return defaultKey(e), nil
	}
	return render(a.key, e)
}

// Summary renders the alert's summary for the event.
func (a CreateAlert) Summary(e *unyov1.Event) (string, error) {
	if a.defaultSummary {
		return capRendered(e.GetOutput()), nil
	}
	return render(a.summary, e)
}

// DeleteAlert resolves the alert with the rendered key.
type DeleteAlert struct {
	// Close also closes the alert; otherwise an operator closes it.
	Close bool
	key   *template.Template
	// defaultKey: the key template is DefaultKeyTemplate.
	defaultKey bool
}

// Key renders the key of the alert to resolve.
func (a DeleteAlert) Key(e *unyov1.Event) (string, error) {
	if a.defaultKey {
		return defaultKey(e), nil
	}
	return render(a.key, e)
}

// defaultKey is DefaultKeyTemplate rendered for e. Most rules keep the
// default templates and render them for every event they match: spelled
// out, they cost no template execution.
func defaultKey(e *unyov1.Event) string { return capRendered(e.GetNode() + "/" + e.GetCheck()) }

// capRendered cuts s to MaxRendered bytes as render does.
func capRendered(s string) string {
	if len(s) <= MaxRendered {
		return s
	}
	return string(cutIncompleteRune([]byte(s[:MaxRendered])))
}

// APIHook posts the event to a URL.
type APIHook struct {
	// URL is an absolute http or https URL.
	URL string
	// Format is FormatUnyo, FormatAlertmanager or FormatAlertmanagerPush.
	Format string
	// Timeout is per attempt.
	Timeout time.Duration
	// Retries is the number of attempts after the first.
	Retries int
	Headers map[string]string
	// RepeatInterval is how long after the last notification a condition
	// still firing at the same level is notified again. A notification is
	// otherwise sent only on a change: firing, a level change, resolved.
	RepeatInterval time.Duration
}

// templateData is what key and summary templates see. Levels and statuses
// are lowercase strings, as rules spell them, not enum numbers.
type templateData struct {
	Node, Check, Cluster string
	Level, Status        string
	Output               string
	Labels               map[string]string
}

// templateFieldList names templateData's fields for error messages.
const templateFieldList = ".Node, .Check, .Cluster, .Level, .Status, .Output or .Labels"

func isTemplateField(f string) bool {
	switch f {
	case "Node", "Check", "Cluster", "Level", "Status", "Output", "Labels":
		return true
	}
	return false
}

var errFull = errors.New("rendered text is too long")

// capWriter keeps the first MaxRendered bytes and then fails, which stops
// the template: a runaway template costs at most that much output.
type capWriter struct{ b []byte }

func (w *capWriter) Write(p []byte) (int, error) {
	room := MaxRendered - len(w.b)
	if len(p) > room {
		w.b = append(w.b, p[:room]...)
		return room, errFull
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// render stops after MaxRendered bytes of output and never panics: the
// checks in compileTemplate leave nothing that should, and a recover turns
// anything text/template lets through (it re-panics runtime errors) into an
// error, since one bad template must not take down the pipeline.
func render(t *template.Template, e *unyov1.Event) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("template %q: %v", t.Name(), r)
		}
	}()
	if t == nil {
		// Only a hand-made zero action gets here.
		return "", errors.New("no template: build actions with Compile")
	}
	d := templateData{
		Node:    e.GetNode(),
		Check:   e.GetCheck(),
		Cluster: e.GetCluster(),
		Level:   e.GetLevel().Name(),
		Status:  e.GetStatus().Name(),
		Output:  e.GetOutput(),
		Labels:  e.GetLabels(),
	}
	w := &capWriter{b: make([]byte, 0, 64)}
	err = t.Execute(w, d)
	if errors.Is(err, errFull) {
		return string(cutIncompleteRune(w.b)), nil
	}
	if err != nil {
		// text/template's errors already name the template (the field path).
		return "", err
	}
	return string(w.b), nil
}

// cutIncompleteRune drops a multi-byte character cut in half at the end of
// b. Bytes that were invalid UTF-8 to begin with are left alone.
func cutIncompleteRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// compileTemplate parses an action template and rejects what could make it
// fail on every event or run unbounded: unknown fields, define, template
// and block (recursion), range over anything but .Labels, and range inside
// range (a no-output loop is not stopped by the output cap, so loops must be
// bounded by the number of labels).
func compileTemplate(name, src string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=zero").Parse(src)
	if err != nil {
		// Parse errors read "template: NAME:LINE: what"; the field path
		// already names the template.
		msg := strings.TrimPrefix(err.Error(), "template: "+name+":")
		if msg != err.Error() {
			msg = "line " + msg
		}
		return nil, fmt.Errorf("invalid template %q: %s", src, msg)
	}
	for _, other := range t.Templates() {
		if other != t {
			return nil, fmt.Errorf("invalid template %q: define and block are not allowed; write the text inline", src)
		}
	}
	if t.Tree != nil {
		if err := checkTemplateNode(t.Root, false, true); err != nil {
			return nil, fmt.Errorf("invalid template %q: %v", src, err)
		}
	}
	return t, nil
}

// checkTemplateNode walks the parse tree. inRange: inside a range body;
// dotIsEvent: dot is still the event (not changed by with or range), so
// field names can be checked.
func checkTemplateNode(n parse.Node, inRange, dotIsEvent bool) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkTemplateNode(c, inRange, dotIsEvent); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkPipe(n.Pipe, dotIsEvent)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode, inRange, dotIsEvent, dotIsEvent)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode, inRange, false, dotIsEvent)
	case *parse.RangeNode:
		if inRange {
			return errors.New("range inside range is not allowed")
		}
		if !rangesOverLabels(n.Pipe) {
			return errors.New("range is allowed only over .Labels, as {{range $name, $value := .Labels}}")
		}
		return checkBranch(&n.BranchNode, true, false, dotIsEvent)
	case *parse.TemplateNode:
		return errors.New("template and block are not allowed; write the text inline")
	}
	return nil
}

// checkBranch checks an if, with or range: the pipeline and else branch
// see the outer dot, the body sees bodyDot.
func checkBranch(b *parse.BranchNode, inRange, bodyDot, outerDot bool) error {
	if err := checkPipe(b.Pipe, outerDot); err != nil {
		return err
	}
	if err := checkTemplateNode(b.List, inRange, bodyDot); err != nil {
		return err
	}
	return checkTemplateNode(b.ElseList, inRange, outerDot)
}

func checkPipe(p *parse.PipeNode, dotIsEvent bool) error {
	if p == nil {
		return nil
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			if err := checkArg(arg, dotIsEvent); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkArg(arg parse.Node, dotIsEvent bool) error {
	switch a := arg.(type) {
	case *parse.FieldNode:
		if dotIsEvent {
			return checkFields(a.Ident)
		}
	case *parse.VariableNode:
		// $ is always the event; other variables may hold anything.
		if len(a.Ident) > 1 && a.Ident[0] == "$" {
			return checkFields(a.Ident[1:])
		}
	case *parse.PipeNode:
		return checkPipe(a, dotIsEvent)
	case *parse.ChainNode:
		if p, ok := a.Node.(*parse.PipeNode); ok {
			return checkPipe(p, dotIsEvent)
		}
	}
	return nil
}

// checkFields checks a field chain on the event, such as .Labels.team.
func checkFields(idents []string) error {
	if len(idents) == 0 {
		return nil
	}
	f := idents[0]
	if !isTemplateField(f) {
		return fmt.Errorf("the event has no field .%s (use %s)", f, templateFieldList)
	}
	switch {
	case f == "Labels" && len(idents) > 2:
		return fmt.Errorf(".Labels.%s is a string and has no field .%s", idents[1], idents[2])
	case f != "Labels" && len(idents) > 1:
		return fmt.Errorf(".%s is a string and has no field .%s", f, idents[1])
	}
	return nil
}

func rangesOverLabels(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return len(a.Ident) == 1 && a.Ident[0] == "Labels"
	case *parse.VariableNode:
		return len(a.Ident) == 2 && a.Ident[0] == "$" && a.Ident[1] == "Labels"
	}
	return false
}

// isDefault reports whether a template as written is def (or empty, which
// means def).
func isDefault(src, def string) bool { return src == "" || src == def }

// compileAction validates one action; problems go to v under field.
func compileAction(v *validator, field string, a *unyov1.Action) (Action, bool) {
	ok := true
	tmpl := func(f, src, def string) *template.Template {
		if src == "" {
			src = def
		}
		t, err := compileTemplate(f, src)
		if err != nil {
			v.Add(f, err.Error())
			ok = false
		}
		return t
	}
	switch k := a.GetKind().(type) {
	case *unyov1.Action_CreateAlert:
		f := field + ".create_alert"
		c := &CreateAlert{}
		// Unset follows the event's level, in Level.
		if raw := k.CreateAlert.GetLevel(); raw != "" {
			l, err := unyov1.ParseAlertLevel(raw)
			if err != nil {
				v.Addf(f+".level", `must be "fatal", "critical" or "warning" (or unset to follow the event's level), got %q`, raw)
				ok = false
			}
			c.level = l
		}
		c.key = tmpl(f+".key", k.CreateAlert.GetKey(), DefaultKeyTemplate)
		c.summary = tmpl(f+".summary", k.CreateAlert.GetSummary(), DefaultSummaryTemplate)
		c.defaultKey = isDefault(k.CreateAlert.GetKey(), DefaultKeyTemplate)
		c.defaultSummary = isDefault(k.CreateAlert.GetSummary(), DefaultSummaryTemplate)
		return Action{Kind: ActionCreateAlert, CreateAlert: c}, ok
	case *unyov1.Action_DeleteAlert:
		f := field + ".delete_alert"
		d := &DeleteAlert{Close: k.DeleteAlert.GetClose()}
		d.key = tmpl(f+".key", k.DeleteAlert.GetKey(), DefaultKeyTemplate)
		d.defaultKey = isDefault(k.DeleteAlert.GetKey(), DefaultKeyTemplate)
		return Action{Kind: ActionDeleteAlert, DeleteAlert: d}, ok
	case *unyov1.Action_ApiHook:
		h, hok := compileHook(v, field+".api_hook", k.ApiHook)
		return Action{Kind: ActionAPIHook, APIHook: h}, hok
	case *unyov1.Action_Plugin:
		f := field + ".plugin"
		name := k.Plugin.GetName()
		switch {
		case name == "":
			v.Add(f+".name", "required: the action plugin to run (unyo-action-<name>, enabled in cluster.plugins)")
			ok = false
		case strings.ContainsAny(name, "/ \t\n"):
			v.Addf(f+".name", "%q must be a plugin name (the <name> in unyo-action-<name>), without slashes or spaces", name)
			ok = false
		}
		every, rok := compileRepeat(v, f+".repeat_interval", k.Plugin.GetRepeatInterval())
		return Action{Kind: ActionPlugin, Plugin: &PluginAction{Name: name, Config: proto.Clone(k.Plugin).(*unyov1.PluginAction), RepeatInterval: every}}, ok && rok
	}
	v.Add(field, "give exactly one of create_alert, delete_alert, api_hook or plugin")
	return Action{}, false
}

func compileHook(v *validator, field string, spec *unyov1.ApiHookAction) (*APIHook, bool) {
	n := len(v.Fields)
	h := &APIHook{
		URL:     spec.GetUrl(),
		Format:  FormatUnyo,
		Timeout: DefaultHookTimeout,
		Retries: DefaultHookRetries,
		Headers: maps.Clone(spec.GetHeaders()),
	}
	if err := checkHookURL(h.URL); err != nil {
		v.Add(field+".url", err.Error())
	}
	switch raw := spec.GetFormat(); raw {
	case "", FormatUnyo:
	case FormatAlertmanager, FormatAlertmanagerPush:
		h.Format = raw
	default:
		v.Addf(field+".format", `must be "unyo", "alertmanager" or "alertmanager_push", got %q`, raw)
	}
	if raw := spec.GetTimeout(); raw != "" {
		if d, ok := v.Duration(field+".timeout", raw); ok {
			switch {
			case d <= 0:
				v.Addf(field+".timeout", "must be positive, got %q", raw)
			case d > MaxHookTimeout:
				v.Addf(field+".timeout", "must be at most %s, got %q", MaxHookTimeout, raw)
			default:
				h.Timeout = d
			}
		}
	}
	h.RepeatInterval, _ = compileRepeat(v, field+".repeat_interval", spec.GetRepeatInterval())
	if h.Format == FormatAlertmanagerPush && spec.GetRepeatInterval() == "" {
		h.RepeatInterval = DefaultPushRepeatInterval
	}
	// proto3 cannot tell 0 from unset, so 0 means the default.
	switch r := spec.GetRetries(); {
	case r == 0:
	case r < 0 || r > MaxHookRetries:
		v.Addf(field+".retries", "must be between 1 and %d (unset means %d), got %d", MaxHookRetries, DefaultHookRetries, r)
	default:
		h.Retries = int(r)
	}
	for _, name := range sortedKeys(h.Headers) {
		switch value := h.Headers[name]; {
		case name == "":
			v.Add(field+".headers", "a header name is empty")
		case !isToken(name):
			v.Addf(fmt.Sprintf("%s.headers[%q]", field, name), "%q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", name)
		case strings.ContainsAny(value, "\r\n\x00"):
			v.Add(fmt.Sprintf("%s.headers[%q]", field, name), "the value must not contain a line break or a NUL byte")
		}
	}
	return h, len(v.Fields) == n
}

// compileRepeat parses a repeat_interval: unset is DefaultRepeatInterval,
// and 0 is EveryResult.
func compileRepeat(v *validator, field, raw string) (time.Duration, bool) {
	if raw == "" {
		return DefaultRepeatInterval, true
	}
	d, ok := v.Duration(field, raw)
	switch {
	case !ok:
		return DefaultRepeatInterval, false
	case d == 0:
		return EveryResult, true
	case d < 0:
		v.Addf(field, "must be positive, or 0 to send on every result (unset means %s), got %q", DefaultRepeatInterval, raw)
	case d > MaxRepeatInterval:
		v.Addf(field, "must be at most %s, got %q", MaxRepeatInterval, raw)
	default:
		return d, true
	}
	return DefaultRepeatInterval, false
}

func checkHookURL(raw string) error {
	if raw == "" {
		return errors.New("required: the http or https URL to post events to")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("invalid URL %q: %v", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL, such as https://hooks.example.com/unyo", raw)
	}
	return nil
}

// isToken reports an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}
