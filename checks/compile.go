package checks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// ValidationError is every invalid field of one check, so an operator fixes
// them all in one round trip. Compile returns it as a *ValidationError.
type ValidationError struct {
	// Check is the name as written, which may itself be invalid or empty.
	Check  string
	Fields []validate.FieldError
}

// Error lists one field per line, each line prefixed with the check name so
// that it still reads well when log lines are split.
func (e *ValidationError) Error() string {
	return validate.Message("check", e.Check, e.Fields)
}

const (
	cronHint = "(expected 5 fields: minute hour day-of-month month day-of-week, or a descriptor such as @hourly or @every 5m)"
)

// Compile validates a check and applies defaults. On failure it returns a
// *ValidationError naming every invalid field.
//
// Rules beyond the schema's comments: exactly one of spec.interval (>= 1s)
// and spec.cron; spec.timeout defaults to 30s, or to the interval when that
// is shorter, and must be in (0, 1h] and no longer than the interval (a run
// outlasting its interval would only make the next run be skipped); cron
// schedules use the standard 5 fields or a descriptor, are evaluated in the
// agent's local time zone unless prefixed with CRON_TZ=Zone, and must fire
// at least once in the next five years. Exactly one of spec.command,
// spec.metric, spec.log and spec.plugin is set; metric and log checks run on
// an interval only (a log check's defaults to DefaultLogInterval); metric,
// log and plugin checks have no env and no spec.metrics_format other than
// nagios.
func Compile(c *unyov1.Check) (Definition, error) {
	v := &validator{}
	d := Definition{
		Name:     c.GetName(),
		Revision: c.GetRevision(),
		Source:   c.GetSource(),
		Labels:   maps.Clone(c.GetLabels()),
	}
	v.Name("name", d.Name)

	spec := c.GetSpec()
	if spec == nil {
		v.Add("spec", "required: a check needs at least spec.command and spec.interval or spec.cron")
		return Definition{}, v.err(d.Name)
	}

	// Kind: exactly one of command, metric, log and plugin.
	d.Command = slices.Clone(spec.GetCommand())
	const oneKind = "set exactly one of spec.command, spec.metric, spec.log and spec.plugin"
	var kinds []string // the kinds set, in schema order
	if len(d.Command) > 0 {
		kinds = append(kinds, "spec.command")
	}
	if spec.GetMetric() != nil {
		kinds = append(kinds, "spec.metric")
	}
	if spec.GetLog() != nil {
		kinds = append(kinds, "spec.log")
	}
	if spec.GetPlugin() != nil {
		kinds = append(kinds, "spec.plugin")
	}
	switch {
	case len(kinds) > 1:
		// The later field is the one that does not belong.
		v.Addf(kinds[len(kinds)-1], "cannot be combined with %s; %s", strings.Join(kinds[:len(kinds)-1], " and "), oneKind)
	case spec.GetMetric() != nil:
		d.Metric = v.metric(spec.GetMetric())
	case spec.GetLog() != nil:
		d.Log = v.log(spec.GetLog())
	case spec.GetPlugin() != nil:
		d.Plugin = v.plugin(spec.GetPlugin())
	default:
		v.checkCommand(d.Command)
	}
	commandless := d.Metric != nil || d.Log != nil
	if (commandless || spec.GetPlugin() != nil) && len(spec.GetEnv()) > 0 {
		v.Add("spec.env", "only a command check has an environment")
	}

	// Schedule: exactly one of interval and cron. Metric and log checks run
	// on an interval only: the cluster evaluates the one, and the other's
	// interval is its rate limit, which a calendar does not express.
	interval := spec.GetInterval()
	if d.Log != nil && interval == "" && spec.GetCron() == "" {
		interval = DefaultLogInterval.String()
	}
	intervalOK := false
	switch {
	case commandless && spec.GetCron() != "":
		v.Add("spec.cron", "a metric or log check runs on spec.interval, not on a cron schedule")
	case interval != "" && spec.GetCron() != "":
		v.Add("spec.cron", "cannot be combined with spec.interval; set exactly one of them")
	case interval == "" && spec.GetCron() == "" && d.Metric != nil:
		v.Add("spec.interval", "required: how often the cluster evaluates spec.metric, such as 60s")
	case interval == "" && spec.GetCron() == "":
		v.Add("spec.interval", "required: set spec.interval (such as 60s) or spec.cron")
	case interval != "":
		if iv, ok := v.Duration("spec.interval", interval); ok {
			if iv < MinInterval {
				v.Addf("spec.interval", "must be at least %s, got %q", MinInterval, interval)
			} else {
				d.Interval, intervalOK = iv, true
			}
		}
	default:
		if s, err := parseCron(spec.GetCron()); err != nil {
			v.Add("spec.cron", err.Error())
		} else {
			d.Cron, d.Schedule = spec.GetCron(), s
		}
	}

	d.Timeout = DefaultTimeout
	if intervalOK && d.Interval < d.Timeout {
		d.Timeout = d.Interval
	}
	if raw := spec.GetTimeout(); raw != "" {
		if t, ok := v.Duration("spec.timeout", raw); ok {
			switch {
			case t <= 0:
				v.Addf("spec.timeout", "must be positive, got %q", raw)
			case t > MaxTimeout:
				v.Addf("spec.timeout", "must be at most %s, got %q", MaxTimeout, raw)
			case intervalOK && t > d.Interval:
				v.Addf("spec.timeout", "%q is longer than spec.interval %q; a run that outlasts its interval only makes the next run be skipped, so shorten the timeout or lengthen the interval", raw, spec.GetInterval())
			default:
				d.Timeout = t
			}
		}
	}

	d.TimeoutStatus = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
	raw := spec.GetTimeoutStatus()
	switch st, _ := unyov1.ParseCheckStatus(raw); {
	case raw == "":
	case st == unyov1.CheckStatus_CHECK_STATUS_UNKNOWN, st == unyov1.CheckStatus_CHECK_STATUS_CRITICAL:
		d.TimeoutStatus = st
	default:
		v.Addf("spec.timeout_status", `must be "unknown" or "critical", got %q`, raw)
	}

	// proto3 cannot tell 0 from unset, so 0 means the default.
	switch n := spec.GetOccurrences(); {
	case n == 0:
		d.Occurrences = 1
	case n < 0:
		v.Addf("spec.occurrences", "must be at least 1, got %d", n)
	default:
		d.Occurrences = int(n)
	}

	if raw := spec.GetReissue(); raw != "" {
		if r, ok := v.Duration("spec.reissue", raw); ok {
			if r < 0 {
				v.Addf("spec.reissue", "must not be negative, got %q", raw)
			} else {
				d.Reissue = r
			}
		}
	}

	if raw := spec.GetTtl(); raw != "" {
		if ttl, ok := v.Duration("spec.ttl", raw); ok {
			switch {
			case commandless:
				v.Add("spec.ttl", "only checks agents run (spec.command, spec.plugin) have a freshness ttl; a metric check reports no_data, a log check only on matches")
			case ttl <= 0:
				v.Addf("spec.ttl", "must be positive, got %q", raw)
			case intervalOK && ttl <= d.Interval:
				v.Addf("spec.ttl", "%q must be longer than spec.interval %q, or every result arrives late", raw, interval)
			default:
				d.TTL = ttl
			}
		}
	}

	d.NodeSelector = maps.Clone(spec.GetNodeSelector())
	if _, ok := d.NodeSelector[""]; ok {
		v.Add("spec.node_selector", "a label name is empty")
	}

	d.Env = maps.Clone(spec.GetEnv())
	for _, k := range slices.Sorted(maps.Keys(d.Env)) {
		field := fmt.Sprintf("spec.env[%q]", k)
		switch err := validate.EnvName(k); {
		case k == "" && err != nil:
			v.Add("spec.env", err.Error())
		case err != nil:
			v.Add(field, err.Error())
		case strings.ContainsRune(d.Env[k], 0):
			v.Add(field, "the value contains a NUL byte, which an environment cannot hold")
		}
	}

	d.UnknownLevel = v.alertLevel("spec.unknown_level", spec.GetUnknownLevel())

	switch f, err := ParseMetricsFormat(spec.GetMetricsFormat()); {
	case err != nil:
		v.Add("spec.metrics_format", err.Error())
	case f != MetricsNagios && len(kinds) == 1 && kinds[0] != "spec.command":
		v.Addf("spec.metrics_format", "only a command check prints metrics; %s reports its own", kinds[0])
	default:
		d.MetricsFormat = f
	}

	if err := v.err(d.Name); err != nil {
		return Definition{}, err
	}
	return d, nil
}

type validator struct{ validate.Fields }

// err returns nil (not a typed nil pointer) when every field is valid.
func (v *validator) err(name string) error {
	if len(v.Fields) == 0 {
		return nil
	}
	return &ValidationError{Check: name, Fields: v.Fields}
}

// alertLevel reads an event level an operator may choose: "critical" (the
// default) or "warning".
func (v *validator) alertLevel(field, raw string) unyov1.Level {
	if raw == "" {
		return unyov1.Level_LEVEL_CRITICAL
	}
	switch l, _ := unyov1.ParseLevel(raw); l {
	case unyov1.Level_LEVEL_CRITICAL, unyov1.Level_LEVEL_WARNING:
		return l
	}
	v.Addf(field, `must be "critical" or "warning", got %q`, raw)
	return unyov1.Level_LEVEL_UNSPECIFIED
}

func (v *validator) checkCommand(argv []string) {
	if len(argv) == 0 {
		v.Add("spec.command", "required: the plugin's argv, such as [check_disk, -w, 20%]")
		return
	}
	switch first := argv[0]; {
	case strings.TrimSpace(first) == "":
		v.Add("spec.command[0]", "must name the plugin to run (a path, or a name in the agent's check directories or PATH)")
	case len(argv) == 1 && strings.ContainsAny(first, " \t\n"):
		// The classic mistake: a whole command line in one string.
		v.Addf("spec.command[0]", "%q contains spaces; spec.command is an argv list, so write each argument as its own item, such as [check_disk, -w, 20%%]", first)
	}
	for i, w := range argv {
		if strings.ContainsRune(w, 0) {
			v.Addf(fmt.Sprintf("spec.command[%d]", i), "contains a NUL byte, which an argument cannot hold")
		}
	}
}

// parseCron wraps cron.ParseStandard with the checks it lacks. It never
// panics on operator input (the parser itself panics on, for example,
// "CRON_TZ=UTC" without a schedule), because the API server parses
// schedules it is sent.
func parseCron(spec string) (s cron.Schedule, err error) {
	if strings.TrimSpace(spec) != spec {
		return nil, fmt.Errorf("invalid schedule %q: leading or trailing space %s", spec, cronHint)
	}
	if (strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")) && !strings.Contains(spec, " ") {
		return nil, fmt.Errorf("invalid schedule %q: a time zone prefix must be followed by a schedule, such as \"CRON_TZ=UTC 0 3 * * *\"", spec)
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule %q: %v %s", spec, r, cronHint)
		}
	}()
	s, err = cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule %q: %w %s", spec, err, cronHint)
	}
	switch sched := s.(type) {
	case cron.ConstantDelaySchedule:
		// cron.Every silently rounds; say so instead of running at a rate
		// the operator did not write.
		raw := spec[strings.LastIndex(spec, " ")+1:]
		d, perr := time.ParseDuration(raw)
		if perr == nil && d < MinInterval {
			return nil, fmt.Errorf("invalid schedule %q: @every must be at least %s", spec, MinInterval)
		}
		if perr == nil && d%time.Second != 0 {
			return nil, fmt.Errorf("invalid schedule %q: @every must be a whole number of seconds", spec)
		}
	case *cron.SpecSchedule:
		// Next gives up after five years and returns the zero time, as for
		// "0 0 30 2 *" (February 30th).
		if sched.Next(time.Now()).IsZero() {
			return nil, fmt.Errorf("invalid schedule %q: it never fires", spec)
		}
	}
	return s, nil
}
