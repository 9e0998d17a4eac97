package pipeline

// Silence stops an event matched by a silence rule: it is marked silenced
// by the rule and no action runs.
type Silence struct{}

// Process implements Stage.
func (Silence) Process(st *State, d *Decision, ev *Event) bool {
	r, ok := st.Rules.Silence(ev.Event, ev.At)
	if !ok {
		return true
	}
	d.RuleMatches[r.Name]++
	ev.SilencedBy = "rule:" + r.Name
	ev.Explanation.Outcome = "silenced"
	ev.step("silence", r.Name, "silenced: no action runs ("+r.Reason+", owner "+r.Owner+")")
	return false
}
