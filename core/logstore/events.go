package logstore

import (
	"maps"
	"time"
)

// EventsApp is the App under which event history is written, so that
// `logs query --app unyo-events` lists it and it never mixes with a
// monitored application's lines.
const EventsApp = "unyo-events"

// Field names used by event history entries. They, not the message text,
// are what history is queried and counted by (Query.Fields, ByField).
const (
	FieldEventID    = "event_id"
	FieldKind       = "event_kind"
	FieldOutcome    = "outcome"
	FieldCheck      = "check"
	FieldSilencedBy = "silenced_by"
	FieldRules      = "rules"
)

// EventRecord is one processed event and what became of it. Writing event
// history through the log store gives it the same retention, querying and
// trace correlation as log lines.
type EventRecord struct {
	Time    time.Time
	Host    string // where the event was processed
	Cluster string
	EventID string
	Kind    string // e.g. "check", "alert", "hook"
	Outcome string // short result, e.g. "delivered", "suppressed", "failed"
	Failed  bool   // stored as level "error", so stats show failure rates
	TraceID string
	Message string // human explanation
	Fields  map[string]string
}

// Entry converts r to a log entry with App EventsApp.
func (r EventRecord) Entry() Entry {
	f := maps.Clone(r.Fields)
	if f == nil {
		f = map[string]string{}
	}
	f[FieldEventID] = r.EventID
	f[FieldKind] = r.Kind
	f[FieldOutcome] = r.Outcome
	level := "info"
	if r.Failed {
		level = "error"
	}
	return Entry{
		Time: r.Time, Host: r.Host, App: EventsApp, Level: level, TraceID: r.TraceID,
		Message: r.Message, Fields: f, Cluster: r.Cluster,
	}
}
