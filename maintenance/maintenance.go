// Package maintenance holds maintenance records and their effect on events.
//
// A maintenance says who (spec.owner) does what (spec.reason) where
// (cluster, spec.nodes, spec.checks) and when (spec.start to spec.end, or
// open-ended until an operator ends it). It exists first as a record, so
// that when work thought harmless does affect users, whoever investigates
// can see who was doing what; second, while active it silences the events
// it covers, and the event says which maintenance silenced it.
//
// Compile validates a stored or submitted *unyov1.Maintenance into a
// Window, the form the event pipeline evaluates; Set answers "which
// maintenance, if any, silences this event now".
package maintenance

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// Statuses reported by Status and Window.Status.
const (
	StatusPlanned = "planned"
	StatusActive  = "active"
	StatusEnded   = "ended"
	// StatusInvalid is a stored maintenance that no longer compiles.
	StatusInvalid = "invalid"
)

const timeHint = "(expected an RFC 3339 time such as 2026-03-01T02:00:00+09:00)"

// ValidationError is every invalid field of one maintenance, in the form
// checks.Compile uses, so the API layer reports both the same way.
type ValidationError struct {
	// Maintenance is the name as written, which may itself be invalid.
	Maintenance string
	Fields      []validate.FieldError
}

// Error lists one field per line, each prefixed with the maintenance name.
func (e *ValidationError) Error() string {
	return validate.Message("maintenance", e.Maintenance, e.Fields)
}

// Window is a compiled maintenance. It is immutable and safe for
// concurrent use.
type Window struct {
	Name    string
	Cluster string
	Owner   string
	Reason  string
	Start   time.Time
	// End is the planned end; zero when open-ended.
	End time.Time
	// EndedAt is when an operator ended it, possibly before End or even
	// before Start (a cancelled plan); zero while not ended.
	EndedAt time.Time
	EndedBy string

	nodes, checks []matcher
}

// matcher is one spec.nodes or spec.checks entry.
type matcher struct {
	exact string
	re    *regexp.Regexp // nil for an exact name
}

func (m matcher) match(s string) bool {
	if m.re == nil {
		return s == m.exact
	}
	return m.re.MatchString(s)
}

// Compile validates a maintenance and resolves its times. On failure it
// returns a *ValidationError naming every invalid field.
//
// Rules: name as for checks (validate.Name); spec.owner and
// spec.reason required, because the record is the point; each spec.nodes
// and spec.checks entry is either a name, matched exactly (so the dots in
// "db1.example" are literal), or else a regular expression anchored at
// both ends ("web.*" matches web1, not myweb1); spec.start and spec.end
// are RFC 3339, start defaults to created_at, or to now when that is unset
// too (a record not yet stored); end, if given, must be after start.
// An end already in the past is not an error: stored maintenances end.
func Compile(m *unyov1.Maintenance, now time.Time) (Window, error) {
	var fields validate.Fields
	add := fields.Addf
	w := Window{
		Name:    m.GetName(),
		Cluster: m.GetCluster(),
		EndedBy: m.GetEndedBy(),
	}
	fields.Name("name", w.Name)
	spec := m.GetSpec()
	if spec == nil {
		add("spec", "required: a maintenance needs at least spec.owner and spec.reason")
		return Window{}, &ValidationError{Maintenance: w.Name, Fields: fields}
	}

	w.Owner = strings.TrimSpace(spec.GetOwner())
	if w.Owner == "" {
		add("spec.owner", "required: who is doing the work, so others know whom to ask")
	}
	w.Reason = strings.TrimSpace(spec.GetReason())
	if w.Reason == "" {
		add("spec.reason", "required: what is being done, such as \"replacing the disk in web1\"")
	}

	compileScope := func(field string, entries []string) []matcher {
		ms := make([]matcher, 0, len(entries))
		for i, raw := range entries {
			f := fmt.Sprintf("%s[%d]", field, i)
			switch {
			case strings.TrimSpace(raw) == "":
				add(f, "is empty; write a name or a regular expression, or remove the entry (an empty list covers everything)")
			case validate.Name(raw) == nil:
				ms = append(ms, matcher{exact: raw})
			default:
				// Compile the entry alone first so that an error quotes
				// what the operator wrote, not the anchored form.
				if _, err := regexp.Compile(raw); err != nil {
					add(f, "%q is neither a name nor a valid regular expression: %s", raw, reErr(err))
					continue
				}
				ms = append(ms, matcher{re: regexp.MustCompile(`^(?:` + raw + `)$`)})
			}
		}
		return ms
	}
	w.nodes = compileScope("spec.nodes", spec.GetNodes())
	w.checks = compileScope("spec.checks", spec.GetChecks())

	startOK := true
	switch raw := spec.GetStart(); {
	case raw != "":
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			add("spec.start", "invalid time %q %s", raw, timeHint)
			startOK = false
		}
		w.Start = t
	case m.GetCreatedAt() != nil:
		w.Start = m.GetCreatedAt().AsTime()
	default:
		w.Start = now
	}
	if raw := spec.GetEnd(); raw != "" {
		t, err := time.Parse(time.RFC3339, raw)
		switch {
		case err != nil:
			add("spec.end", "invalid time %q %s", raw, timeHint)
		case startOK && !t.After(w.Start):
			add("spec.end", "%s is not after the start %s; leave spec.end empty for a maintenance without a planned end",
				raw, w.Start.Format(time.RFC3339))
		default:
			w.End = t
		}
	}
	if m.GetEndedAt() != nil {
		w.EndedAt = m.GetEndedAt().AsTime()
	}

	if len(fields) > 0 {
		return Window{}, &ValidationError{Maintenance: w.Name, Fields: fields}
	}
	return w, nil
}

// reErr drops the "error parsing regexp: " prefix that regexp adds, which
// says nothing the field description does not.
func reErr(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("%s: `%s`", se.Code, se.Expr)
	}
	return err.Error()
}

// Until is when the window stops being active: the earlier of the planned
// end and the time it was ended; zero while it is open-ended and running.
func (w Window) Until() time.Time {
	switch {
	case w.EndedAt.IsZero():
		return w.End
	case w.End.IsZero() || w.EndedAt.Before(w.End):
		return w.EndedAt
	}
	return w.End
}

// Active reports whether the window is in effect at now: Start <= now and
// now before Until (an open-ended window never ends by itself).
func (w Window) Active(now time.Time) bool {
	return w.Status(now) == StatusActive
}

// Status is "planned" before the start, "active" during the window, "ended"
// after the planned end or once an operator ended it (even if it never
// started).
func (w Window) Status(now time.Time) string {
	if u := w.Until(); !u.IsZero() && !now.Before(u) {
		return StatusEnded
	}
	if now.Before(w.Start) {
		return StatusPlanned
	}
	return StatusActive
}

// Covers reports whether the window's scope includes this node and check.
// An empty spec.nodes covers every node and an empty spec.checks every
// check; otherwise some entry must match, for both.
func (w Window) Covers(node, check string) bool {
	return matchAny(w.nodes, node) && matchAny(w.checks, check)
}

func matchAny(ms []matcher, s string) bool {
	if len(ms) == 0 {
		return true
	}
	return slices.ContainsFunc(ms, func(m matcher) bool { return m.match(s) })
}

// Silences reports whether the window silences e at now: it is active and
// covers e's node and check. A window of one cluster never silences
// another cluster's events (either cluster unset counts as a match, since
// a cluster's pipeline sees only its own).
func (w Window) Silences(e *unyov1.Event, now time.Time) bool {
	if w.Cluster != "" && e.GetCluster() != "" && w.Cluster != e.GetCluster() {
		return false
	}
	return w.Active(now) && w.Covers(e.GetNode(), e.GetCheck())
}

// Status is the status of a stored maintenance at now: "planned",
// "active" or "ended". A maintenance that does not compile (stored before
// a validation rule existed, say) is reported as "invalid" rather than
// guessed at.
func Status(m *unyov1.Maintenance, now time.Time) string {
	w, err := Compile(m, now)
	if err != nil {
		return StatusInvalid
	}
	return w.Status(now)
}

// Set is the maintenances of a cluster, as the event pipeline evaluates
// them. It is immutable once built and safe for concurrent use; rebuild it
// when maintenances change.
type Set struct {
	windows []Window // sorted by name
}

// NewSet builds a Set. The windows are sorted by name (ties by start), so
// that which maintenance an event is attributed to does not depend on the
// order they were loaded in.
func NewSet(windows ...Window) Set {
	ws := slices.Clone(windows)
	slices.SortStableFunc(ws, func(a, b Window) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
	return Set{windows: ws}
}

// Compiled builds a Set from stored maintenances. One that does not
// compile is left out and its error returned, so that a single bad record
// does not stop the others from silencing; the caller logs the errors.
func Compiled(ms []*unyov1.Maintenance, now time.Time) (Set, []error) {
	var (
		ws   []Window
		errs []error
	)
	for _, m := range ms {
		w, err := Compile(m, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ws = append(ws, w)
	}
	return NewSet(ws...), errs
}

// Len is the number of windows in the set.
func (s Set) Len() int { return len(s.windows) }

// Windows returns the set's windows, sorted by name.
func (s Set) Windows() []Window { return slices.Clone(s.windows) }

// Silencing returns the name of the first maintenance, by name, that
// silences e at now.
func (s Set) Silencing(e *unyov1.Event, now time.Time) (name string, ok bool) {
	for _, w := range s.windows {
		if w.Silences(e, now) {
			return w.Name, true
		}
	}
	return "", false
}
