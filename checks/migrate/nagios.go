package migrate

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Node selector labels of imported Nagios checks: a service on a host runs
// on the node labelled HostLabel+host, one on a hostgroup on the nodes
// labelled HostgroupLabel+group (Result.NodeLabels lists each host's).
const (
	HostLabel      = "nagios.host/"
	HostgroupLabel = "nagios.hostgroup/"
)

// NagiosOptions are what nagios.cfg and resource.cfg would say.
type NagiosOptions struct {
	// IntervalLength is nagios.cfg's interval_length, the unit of
	// check_interval (default 60s).
	IntervalLength time.Duration
	// User are the $USERn$ macros of resource.cfg; $USER1$ defaults to
	// Debian's plugin directory. Files given to Nagios that set $USERn$=
	// (resource.cfg) add to them.
	User map[string]string
}

// nagiosObject is one `define TYPE { ... }` block.
type nagiosObject struct {
	typ   string
	where string // file:line of the define
	attrs map[string]string
}

func (o *nagiosObject) get(k string) string { return o.attrs[k] }

// Nagios translates Nagios object definitions: every registered service
// with a check_command becomes a Check (command from its command with
// $ARGn$, $USERn$ and host macros filled in, check_interval as interval,
// max_check_attempts as occurrences, freshness_threshold as ttl), with a
// node selector for its hosts or hostgroups. Templates (use, name,
// register 0) are inherited as Nagios does.
func Nagios(files []File, opt NagiosOptions) Result {
	if opt.IntervalLength == 0 {
		opt.IntervalLength = time.Minute
	}
	user := map[string]string{"USER1": "/usr/lib/nagios/plugins"}
	maps.Copy(user, opt.User)
	var objs []*nagiosObject
	var notes []Note
	for _, f := range files {
		o, u, n := parseNagios(f)
		objs = append(objs, o...)
		maps.Copy(user, u)
		notes = append(notes, n...)
	}
	t := &nagiosTranslation{user: user, intervalLength: opt.IntervalLength, names: names{}, notes: notes,
		templates: map[string]map[string]*nagiosObject{}, hosts: map[string]*nagiosObject{},
		commands: map[string]*nagiosObject{}, groups: map[string][]string{}}
	t.index(objs)
	return t.run(objs)
}

// parseNagios reads one object file: define blocks, and $USERn$=value
// lines of a resource file.
func parseNagios(f File) (objs []*nagiosObject, user map[string]string, notes []Note) {
	user = map[string]string{}
	var cur *nagiosObject
	sc := bufio.NewScanner(bytes.NewReader(f.Data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := stripComment(sc.Text())
		where := fmt.Sprintf("%s:%d", f.Name, n)
		if line == "" {
			continue
		}
		if cur == nil {
			if rest, ok := strings.CutPrefix(line, "define"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '{') {
				typ, _, _ := strings.Cut(strings.TrimSpace(rest), "{")
				cur = &nagiosObject{typ: strings.TrimSpace(typ), where: where, attrs: map[string]string{}}
				continue
			}
			if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "$USER") && strings.HasSuffix(k, "$") {
				user[strings.Trim(k, "$")] = v
				continue
			}
			notes = append(notes, Note{where, fmt.Sprintf("%q is outside any define block; ignored (give the object files, not nagios.cfg)", line)})
			continue
		}
		if line == "}" || strings.HasPrefix(line, "}") {
			objs = append(objs, cur)
			cur = nil
			continue
		}
		k, v, _ := strings.Cut(strings.Replace(line, "\t", " ", 1), " ")
		v = strings.TrimSpace(v)
		if strings.HasSuffix(v, "}") { // "check_command foo }": the block ends on the line
			cur.attrs[k] = strings.TrimSpace(strings.TrimSuffix(v, "}"))
			objs = append(objs, cur)
			cur = nil
			continue
		}
		cur.attrs[k] = v
	}
	if cur != nil {
		notes = append(notes, Note{cur.where, "define " + cur.typ + " is not closed by }; ignored"})
	}
	return objs, user, notes
}

// stripComment removes a line's comment: a line starting with # or ;, or
// the rest of a line after an unescaped ; (\; is a semicolon).
func stripComment(line string) string {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
		return ""
	}
	for i := 0; i < len(line); i++ {
		if line[i] == ';' && (i == 0 || line[i-1] != '\\') {
			line = line[:i]
			break
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(line, `\;`, ";"))
}

type nagiosTranslation struct {
	user           map[string]string
	intervalLength time.Duration
	names          names
	notes          []Note
	templates      map[string]map[string]*nagiosObject // type → name → template
	hosts          map[string]*nagiosObject            // resolved, by host_name
	commands       map[string]*nagiosObject            // by command_name
	groups         map[string][]string                 // hostgroup → member hosts
}

// note records a note once (templates are resolved more than once).
func (t *nagiosTranslation) note(where, format string, args ...any) {
	n := Note{where, fmt.Sprintf(format, args...)}
	if !slices.Contains(t.notes, n) {
		t.notes = append(t.notes, n)
	}
}

// index records templates, then resolved hosts, commands and hostgroup
// memberships (members of the group, hostgroups of the host, nested
// hostgroup_members).
func (t *nagiosTranslation) index(objs []*nagiosObject) {
	for _, o := range objs {
		if name := o.get("name"); name != "" {
			if t.templates[o.typ] == nil {
				t.templates[o.typ] = map[string]*nagiosObject{}
			}
			t.templates[o.typ][name] = o
		}
	}
	members := map[string]map[string]bool{}
	add := func(group, host string) {
		if members[group] == nil {
			members[group] = map[string]bool{}
		}
		members[group][host] = true
	}
	nested := map[string][]string{}
	for _, o := range objs {
		if o.get("register") == "0" {
			continue
		}
		r := t.resolve(o)
		switch o.typ {
		case "host":
			t.hosts[r.get("host_name")] = r
			for _, g := range list(r.get("hostgroups")) {
				add(g, r.get("host_name"))
			}
		case "command":
			t.commands[r.get("command_name")] = r
		case "hostgroup":
			g := r.get("hostgroup_name")
			for _, h := range list(r.get("members")) {
				add(g, h)
			}
			nested[g] = list(r.get("hostgroup_members"))
			if members[g] == nil {
				members[g] = map[string]bool{}
			}
		}
	}
	// A group's hostgroup_members' hosts are its hosts too.
	for g, subs := range nested {
		seen := map[string]bool{g: true}
		for len(subs) > 0 {
			s := subs[0]
			subs = subs[1:]
			if seen[s] {
				continue
			}
			seen[s] = true
			for h := range members[s] {
				add(g, h)
			}
			subs = append(subs, nested[s]...)
		}
	}
	for g, hs := range members {
		t.groups[g] = slices.Sorted(maps.Keys(hs))
	}
}

// resolve returns o with what its templates give it: its own directives
// win, then the templates in the order use lists them, each with its own.
func (t *nagiosTranslation) resolve(o *nagiosObject) *nagiosObject {
	out := &nagiosObject{typ: o.typ, where: o.where, attrs: map[string]string{}}
	seen := map[*nagiosObject]bool{}
	var inherit func(o *nagiosObject, own bool)
	inherit = func(o *nagiosObject, own bool) {
		if seen[o] {
			return
		}
		seen[o] = true
		for k, v := range o.attrs {
			if !own && (k == "name" || k == "register") {
				continue // a template's own identity is not inherited
			}
			if _, set := out.attrs[k]; !set {
				out.attrs[k] = v
			}
		}
		for _, u := range list(o.get("use")) {
			tpl, ok := t.templates[o.typ][u]
			if !ok {
				t.note(o.where, "template %q (use) is not defined in the files given", u)
				continue
			}
			inherit(tpl, false)
		}
	}
	inherit(o, true)
	delete(out.attrs, "use")
	return out
}

// list splits a comma-separated directive value.
func list(s string) []string {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// serviceTranslated are the service directives the translation carries
// over or that mean nothing in unyo (identity, Nagios's internal
// scheduling and retention); others are named in a note.
var serviceTranslated = map[string]bool{
	"host_name": true, "hostgroup_name": true, "service_description": true, "check_command": true,
	"check_interval": true, "normal_check_interval": true, "max_check_attempts": true,
	"check_freshness": true, "freshness_threshold": true, "active_checks_enabled": true,
	"name": true, "register": true, "display_name": true, "is_volatile": true, "parallelize_check": true,
	"obsess_over_service": true, "process_perf_data": true, "retain_status_information": true,
	"retain_nonstatus_information": true, "passive_checks_enabled": true, "failure_prediction_enabled": true,
	"notes": true, "notes_url": true, "action_url": true, "icon_image": true, "icon_image_alt": true,
}

// notificationDirective are directives about notifying people, which unyo
// does with event rules.
func notificationDirective(k string) bool {
	return strings.HasPrefix(k, "notification") || k == "contacts" || k == "contact_groups" ||
		k == "first_notification_delay" || k == "notifications_enabled"
}

func (t *nagiosTranslation) run(objs []*nagiosObject) Result {
	var res Result
	var hostChecks []string
	for _, o := range objs {
		if o.get("register") == "0" {
			continue
		}
		switch o.typ {
		case "service":
			res.Checks = append(res.Checks, t.service(t.resolve(o))...)
		case "host":
			if c := t.resolve(o).get("check_command"); c != "" {
				hostChecks = append(hostChecks, o.get("host_name"))
			}
		case "hostgroup", "command", "timeperiod", "contact", "contactgroup":
		default:
			t.note(o.where, "define %s is not translated (unyo imports services, with their hosts, hostgroups and commands)", o.typ)
		}
	}
	if len(hostChecks) > 0 {
		t.note("hosts", "host checks (check_command of %s) are not translated: an agent's heartbeat is its node's liveness (unyo nodes ls); a device without an agent needs a service check run from another node", strings.Join(hostChecks, ", "))
	}
	res.NodeLabels = map[string]map[string]string{}
	for h := range t.hosts {
		res.NodeLabels[h] = map[string]string{HostLabel + h: "true"}
	}
	for g, hs := range t.groups {
		for _, h := range hs {
			if res.NodeLabels[h] == nil {
				res.NodeLabels[h] = map[string]string{HostLabel + h: "true"}
			}
			res.NodeLabels[h][HostgroupLabel+g] = "true"
		}
	}
	res.Notes = t.notes
	return res
}

// target is where a translated service runs: a host or a hostgroup (or
// every node).
type target struct {
	host, group string
	all         bool
}

func (tg target) selector() map[string]string {
	switch {
	case tg.all:
		return nil
	case tg.host != "":
		return map[string]string{HostLabel + tg.host: "true"}
	}
	return map[string]string{HostgroupLabel + tg.group: "true"}
}

func (tg target) String() string {
	if tg.host != "" {
		return tg.host
	}
	return tg.group
}

var hostMacro = regexp.MustCompile(`\$HOST[A-Z_]*\$`)

// service translates one resolved service into a Check per target.
func (t *nagiosTranslation) service(s *nagiosObject) []*unyov1.Check {
	desc := s.get("service_description")
	where := fmt.Sprintf("%s (service %q)", s.where, desc)
	if desc == "" {
		t.note(s.where, "a service without service_description is not translated")
		return nil
	}
	if s.get("active_checks_enabled") == "0" {
		t.note(where, "passive service (active_checks_enabled 0) is not translated: unyo's agents run every check")
		return nil
	}
	name, args := splitCheckCommand(s.get("check_command"))
	cmd, ok := t.commands[name]
	if !ok {
		t.note(where, "check_command %q is not defined in the files given; not translated", name)
		return nil
	}
	line := substituteArgs(cmd.get("command_line"), args)
	var targets []target
	for _, h := range list(s.get("host_name")) {
		switch {
		case h == "*":
			targets = append(targets, target{all: true})
		case strings.HasPrefix(h, "!"):
			t.note(where, "host exclusion %q is not translated: label the nodes instead", h)
		default:
			targets = append(targets, target{host: h})
		}
	}
	for _, g := range list(s.get("hostgroup_name")) {
		switch {
		case g == "*":
			targets = append(targets, target{all: true})
		case strings.HasPrefix(g, "!"):
			t.note(where, "hostgroup exclusion %q is not translated: label the nodes instead", g)
		default:
			targets = append(targets, target{group: g})
		}
	}
	// Host macros differ per host: such a service becomes one check per host.
	if hostMacro.MatchString(line) {
		var hosts []target
		for _, tg := range targets {
			switch {
			case tg.all:
				for _, h := range slices.Sorted(maps.Keys(t.hosts)) {
					hosts = append(hosts, target{host: h})
				}
			case tg.group != "":
				for _, h := range t.groups[tg.group] {
					hosts = append(hosts, target{host: h})
				}
			default:
				hosts = append(hosts, tg)
			}
		}
		targets = hosts
	}
	if len(targets) == 0 {
		t.note(where, "no host or hostgroup to run on; not translated")
		return nil
	}

	spec := &unyov1.CheckSpec{}
	interval := t.intervalLength * 5 // Nagios's default check_interval
	if v := firstSet(s.get("check_interval"), s.get("normal_check_interval")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.note(where, "check_interval %q is not a positive number; 5 intervals used", v)
		} else {
			interval = time.Duration(f * float64(t.intervalLength))
		}
	}
	spec.Interval = interval.String()
	if v := s.get("max_check_attempts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.note(where, "max_check_attempts %q is not a positive integer; not translated", v)
		} else if n > 1 {
			spec.Occurrences = int32(n)
		}
	}
	if s.get("check_freshness") == "1" {
		if v, err := strconv.Atoi(s.get("freshness_threshold")); err == nil && v > 0 && time.Duration(v)*time.Second > interval {
			spec.Ttl = (time.Duration(v) * time.Second).String()
		} else {
			t.note(where, "check_freshness without a freshness_threshold longer than the interval is not translated (unyo's ttl needs one)")
		}
	}
	var skipped, notify []string
	for _, k := range slices.Sorted(maps.Keys(s.attrs)) {
		switch {
		case serviceTranslated[k]:
		case notificationDirective(k):
			notify = append(notify, k)
		case k == "check_period" && s.attrs[k] == "24x7":
		default:
			skipped = append(skipped, k+" "+s.attrs[k])
		}
	}
	if len(skipped) > 0 {
		t.note(where, "not translated: %s", strings.Join(skipped, "; "))
	}
	if len(notify) > 0 {
		t.note(where, "notification directives (%s) are not translated: unyo notifies through event rules (kind EventRule)", strings.Join(notify, ", "))
	}

	var out []*unyov1.Check
	for _, tg := range targets {
		c := &unyov1.Check{Spec: cloneSpec(spec)}
		if len(targets) == 1 {
			c.Name = t.names.of(desc)
		} else {
			c.Name = t.names.of(desc, tg.String())
		}
		c.Spec.NodeSelector = tg.selector()
		l, ok := t.macros(line, tg, s, where)
		if !ok {
			continue
		}
		c.Spec.Command = argv(l)
		out = append(out, c)
	}
	return out
}

func cloneSpec(s *unyov1.CheckSpec) *unyov1.CheckSpec {
	return &unyov1.CheckSpec{Interval: s.Interval, Occurrences: s.Occurrences, Ttl: s.Ttl}
}

func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// splitCheckCommand splits "check_ping!100.0,20%!500.0,60%" into the
// command's name and its $ARGn$ values (\! is an exclamation mark).
func splitCheckCommand(s string) (string, []string) {
	const bang = "\x00"
	parts := strings.Split(strings.ReplaceAll(s, `\!`, bang), "!")
	for i := range parts {
		parts[i] = strings.ReplaceAll(parts[i], bang, "!")
	}
	return strings.TrimSpace(parts[0]), parts[1:]
}

var argMacro = regexp.MustCompile(`\$ARG([0-9]+)\$`)

// substituteArgs fills in $ARGn$; a missing argument is empty, as in Nagios.
func substituteArgs(line string, args []string) string {
	return argMacro.ReplaceAllStringFunc(line, func(m string) string {
		n, _ := strconv.Atoi(argMacro.FindStringSubmatch(m)[1])
		if n >= 1 && n <= len(args) {
			return args[n-1]
		}
		return ""
	})
}

var anyMacro = regexp.MustCompile(`\$([A-Z0-9_]*)\$`)

// macros fills in the macros left after $ARGn$: $USERn$, the host's
// $HOSTADDRESS$, $HOSTNAME$ and $HOSTALIAS$, $SERVICEDESC$ and $$. Any
// other macro has no value in unyo; the check is then left out.
func (t *nagiosTranslation) macros(line string, tg target, s *nagiosObject, where string) (string, bool) {
	host := t.hosts[tg.host]
	var unknown []string
	out := anyMacro.ReplaceAllStringFunc(line, func(m string) string {
		name := strings.Trim(m, "$")
		switch {
		case name == "":
			return "$"
		case strings.HasPrefix(name, "USER"):
			if v, ok := t.user[name]; ok {
				return v
			}
		case name == "SERVICEDESC":
			return s.get("service_description")
		case host != nil && name == "HOSTADDRESS":
			return firstSet(host.get("address"), host.get("host_name"))
		case host != nil && name == "HOSTNAME":
			return host.get("host_name")
		case host != nil && name == "HOSTALIAS":
			return firstSet(host.get("alias"), host.get("host_name"))
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		t.note(where, "macros %s have no value in unyo; check for %s not translated", strings.Join(slices.Compact(unknown), ", "), tg)
		return "", false
	}
	return out, true
}

// NagiosMain is what the importer reads of a main configuration file
// (nagios.cfg): the object files and directories it loads, its resource
// files, and interval_length.
type NagiosMain struct {
	CfgFiles, CfgDirs, ResourceFiles []string
	IntervalLength                   time.Duration
}

// ParseNagiosMain reads a main configuration file; ok is false when the
// file names no object file or directory, so it is an object file itself.
func ParseNagiosMain(data []byte) (m NagiosMain, ok bool) {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, found := strings.Cut(line, "=")
		if !found {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "cfg_file":
			m.CfgFiles = append(m.CfgFiles, v)
		case "cfg_dir":
			m.CfgDirs = append(m.CfgDirs, v)
		case "resource_file":
			m.ResourceFiles = append(m.ResourceFiles, v)
		case "interval_length":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				m.IntervalLength = time.Duration(n) * time.Second
			}
		}
	}
	return m, len(m.CfgFiles)+len(m.CfgDirs) > 0
}
