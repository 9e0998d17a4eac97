package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/store"
)

// historyLevels pairs each event level with the log level its history
// entry is written with, so that `unyo logs stats` on the event history
// counts events by level like any log; the statistics tier reads the
// event level back from the log level.
var historyLevels = []struct {
	level unyov1.Level
	log   string
}{
	{unyov1.Level_LEVEL_SUCCESS, "info"},
	{unyov1.Level_LEVEL_WARNING, "warn"},
	{unyov1.Level_LEVEL_CRITICAL, "error"},
}

// historyLevel is the log level of an event's history entry.
func historyLevel(l unyov1.Level) string {
	for _, h := range historyLevels {
		if h.level == l {
			return h.log
		}
	}
	return "info"
}

// eventLevelName turns a log level of the event history back into the
// event level's name.
func eventLevelName(level string) string {
	for _, h := range historyLevels {
		if h.log == level {
			return h.level.Name()
		}
	}
	return level
}

// historyMessage is the text of an event's history entry, for people:
// queries select by its fields (logstore.FieldCheck, FieldOutcome), so its
// wording is free to change.
func historyMessage(check, outcome, output string) string {
	return fmt.Sprintf("check=%s outcome=%s: %s", check, outcome, output)
}

// recordHistory writes processed events with their outcome to the log
// store, the long-term event history.
func (c *Cluster) recordHistory(ctx context.Context, events []store.SeqEvent, explained []store.Explained) {
	c.writeHistory(ctx, c.historyEntries(events, explained))
}

// historyEntries are the history lines of processed events; with a WAL,
// prepared as the log store keeps them, so that the WAL holds the lines the
// store will and replay recognises them.
func (c *Cluster) historyEntries(events []store.SeqEvent, explained []store.Explained) []logstore.Entry {
	if c.opts.Logs == nil || len(events) == 0 {
		return nil
	}
	outcome := make(map[string]store.Explained, len(explained))
	for _, x := range explained {
		outcome[x.ID] = x
	}
	entries := make([]logstore.Entry, 0, len(events))
	for _, se := range events {
		e := se.Event
		x, found := outcome[e.GetId()]
		ex := x.Explanation
		silencedBy := e.GetSilencedBy()
		if found {
			silencedBy = x.SilencedBy
		}
		var rules []string
		for _, s := range ex.GetSteps() {
			if s.GetRule() != "" {
				rules = append(rules, s.GetRule())
			}
		}
		entry := logstore.EventRecord{
			Time: eventTime(e), Host: e.GetNode(), Cluster: c.opts.Name, EventID: e.GetId(), Kind: "check",
			Outcome: ex.GetOutcome(), Message: historyMessage(e.GetCheck(), ex.GetOutcome(), e.GetOutput()),
			Fields: map[string]string{logstore.FieldCheck: e.GetCheck(), logstore.FieldSilencedBy: silencedBy, logstore.FieldRules: strings.Join(rules, ",")},
		}.Entry()
		entry.Level = historyLevel(e.GetLevel())
		entries = append(entries, entry)
	}
	if c.opts.TelemetryWAL != nil {
		entries = prepareLines(entries)
	}
	return entries
}

// logHistory makes the history lines of a pipeline batch durable before the
// batch is committed (expect and cursor are the commit's cursors), so that
// no committed batch loses its history to a kill. It is best effort: when
// the WAL cannot take them (full, say), the pipeline goes on, since alerts
// matter more than the history, and the lines are written as before.
func (c *Cluster) logHistory(ctx context.Context, expect, cursor int64, entries []logstore.Entry) bool {
	if c.opts.TelemetryWAL == nil || len(entries) == 0 {
		return false
	}
	rec, err := historyRecord(recHistory, expect, cursor, entries)
	if err == nil {
		err = c.opts.TelemetryWAL.Append(ctx, rec)
	}
	if err != nil {
		c.log.Warn("event history is not durable until the log store flushes it: the telemetry WAL cannot take it", "events", len(entries), "err", err)
		return false
	}
	return true
}

// abortHistory marks a batch logged by logHistory whose commit failed, so
// that replay does not write its lines.
func (c *Cluster) abortHistory(ctx context.Context, expect, cursor int64) {
	rec, _ := historyRecord(recHistoryAbort, expect, cursor, nil)
	if err := c.opts.TelemetryWAL.Append(ctx, rec); err != nil {
		c.log.Warn("telemetry WAL: cannot mark uncommitted event history", "cursor", cursor, "err", err)
	}
}

// writeHistory writes history lines to the log store. It runs after the
// pipeline committed and is best effort: the state store keeps the recent
// history either way, and the WAL has the lines when there is one.
func (c *Cluster) writeHistory(ctx context.Context, entries []logstore.Entry) {
	if c.opts.Logs == nil || len(entries) == 0 {
		return
	}
	if err := c.opts.Logs.Write(ctx, entries); err != nil && ctx.Err() == nil {
		c.log.Warn("writing event history to the log store failed", "events", len(entries), "err", err)
	}
}
