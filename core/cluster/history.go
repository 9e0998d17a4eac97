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
// store, the long-term event history. It runs after the pipeline committed
// and is best effort: the state store keeps the recent history either way.
func (c *Cluster) recordHistory(ctx context.Context, events []store.SeqEvent, explained []store.Explained) {
	if c.opts.Logs == nil || len(events) == 0 {
		return
	}
	outcome := make(map[string]*unyov1.Explanation, len(explained))
	for _, x := range explained {
		outcome[x.ID] = x.Explanation
	}
	entries := make([]logstore.Entry, 0, len(events))
	for _, se := range events {
		e := se.Event
		ex := outcome[e.GetId()]
		var rules []string
		for _, s := range ex.GetSteps() {
			if s.GetRule() != "" {
				rules = append(rules, s.GetRule())
			}
		}
		entry := logstore.EventRecord{
			Time: eventTime(e), Host: e.GetNode(), Cluster: c.opts.Name, EventID: e.GetId(), Kind: "check",
			Outcome: ex.GetOutcome(), Message: historyMessage(e.GetCheck(), ex.GetOutcome(), e.GetOutput()),
			Fields: map[string]string{logstore.FieldCheck: e.GetCheck(), logstore.FieldSilencedBy: e.GetSilencedBy(), logstore.FieldRules: strings.Join(rules, ",")},
		}.Entry()
		entry.Level = historyLevel(e.GetLevel())
		entries = append(entries, entry)
	}
	if err := c.opts.Logs.Write(ctx, entries); err != nil && ctx.Err() == nil {
		c.log.Warn("writing event history to the log store failed", "events", len(entries), "err", err)
	}
}
