package pipeline

// Maintenance stops an event in the scope of an active maintenance window:
// it is marked silenced by it and no action runs.
type Maintenance struct{}

// Process implements Stage.
func (Maintenance) Process(st *State, d *Decision, ev *Event) bool {
	name, ok := st.Maintenance.Silencing(ev.Event, ev.At)
	if !ok {
		return true
	}
	d.MaintenanceSilenced[name]++
	ev.SilencedBy = "maintenance:" + name
	ev.Explanation.Outcome = "silenced"
	ev.step("maintenance", name, "silenced by maintenance "+name+": no action runs")
	return false
}
