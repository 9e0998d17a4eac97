// Package checks is unyo's check definition model: it turns the Check
// message an operator applies (or an agent reads from its local config) into
// a validated Definition with defaults applied, which the agent's scheduler
// and executor use without re-parsing strings.
package checks

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Defaults and limits applied by Compile.
const (
	// DefaultTimeout applies when spec.timeout is unset; an interval check
	// shorter than this gets its interval as the timeout instead.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout bounds spec.timeout: a plugin that needs longer than this is
	// a batch job, not a check.
	MaxTimeout = time.Hour
	// MinInterval bounds spec.interval (and @every): sub-second checks would
	// spend more on fork/exec than on checking.
	MinInterval = time.Second
)

// Definition is a compiled check: every field validated, every default
// applied. Build one with Compile.
type Definition struct {
	Name string
	// Command is the plugin's argv; Command[0] is a path or a bare name that
	// the agent resolves in its check directories or PATH.
	Command []string
	// Exactly one of Interval and Cron is set.
	Interval time.Duration
	Cron     string
	// Schedule is Cron parsed; nil for interval checks.
	Schedule cron.Schedule
	Timeout  time.Duration
	// TimeoutStatus is what a timed-out run reports: UNKNOWN or CRITICAL.
	TimeoutStatus unyov1.CheckStatus
	// Occurrences is how many consecutive non-OK results raise an event (>= 1).
	Occurrences int
	// Reissue suppresses a repeat of the same node/check/level within this
	// window; 0 disables suppression.
	Reissue time.Duration
	// TTL is the check's freshness: the cluster raises an UNKNOWN event
	// for a Ready node whose results of it stop for longer; 0 disables it.
	TTL time.Duration
	// NodeSelector labels a node must carry; empty selects every node.
	NodeSelector map[string]string
	// Labels are the check's own labels (metadata.labels): its results
	// carry them, under the node's labels, to rules and webhooks.
	Labels map[string]string
	// Env is added to the plugin's environment.
	Env map[string]string
	// MetricsFormat is how a command check prints its metrics: Nagios
	// perfdata (the default) or one of the line protocols of metricformat.
	MetricsFormat MetricsFormat
	// UnknownLevel is the event level of an UNKNOWN result: CRITICAL or WARNING.
	UnknownLevel unyov1.Level
	Revision     int64
	// Source is "central" or "local"; informational.
	Source string
	// Metric is set for a metric check (Command is then empty): the cluster
	// evaluates it, agents never run it.
	Metric *Metric
	// Log is set for a log check (Command is then empty): agents match it
	// against the lines they tail instead of running a command.
	Log *Log
	// Plugin is set for a plugin check (Command is then empty): agents run
	// it through the check plugin instead of a command.
	Plugin *Plugin
}

// Selects reports whether a node with these labels should run the check:
// every selector label must be present with an equal value.
func (d Definition) Selects(nodeLabels map[string]string) bool {
	for k, want := range d.NodeSelector {
		if got, ok := nodeLabels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// SpecHash identifies what the check does and when: two Definitions with the
// same hash behave identically, so a scheduler can leave the check running.
// Revision and Source are left out because they change without changing
// behaviour (a re-applied check, or one moved from local to central config).
func (d Definition) SpecHash() string {
	h := sha256.New()
	writeString(h, d.Name)
	writeInt(h, int64(len(d.Command)))
	for _, w := range d.Command {
		writeString(h, w)
	}
	writeInt(h, int64(d.Interval))
	writeString(h, d.Cron)
	writeInt(h, int64(d.Timeout))
	writeInt(h, int64(d.TimeoutStatus))
	writeInt(h, int64(d.Occurrences))
	writeInt(h, int64(d.Reissue))
	writeMap(h, d.NodeSelector)
	writeMap(h, d.Env)
	writeInt(h, int64(d.UnknownLevel))
	writeString(h, string(d.MetricsFormat))
	if m := d.Metric; m != nil {
		writeString(h, "metric")
		writeString(h, m.Expr)
		writeString(h, rangeString(m.Warning))
		writeString(h, rangeString(m.Critical))
		writeInt(h, int64(m.For))
		writeInt(h, int64(m.NoData))
	}
	if l := d.Log; l != nil {
		writeString(h, "log")
		writeString(h, l.App)
		writeString(h, l.File)
		writeString(h, regexpString(l.Pattern))
		writeString(h, l.Field)
		writeString(h, regexpString(l.FieldPattern))
		writeInt(h, int64(len(l.Levels)))
		for _, lv := range l.Levels {
			writeString(h, lv)
		}
		writeInt(h, int64(l.Level))
	}
	if p := d.Plugin; p != nil {
		writeString(h, "plugin")
		writeString(h, p.Name)
		writeString(h, p.targetJSON())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The hash input is length-prefixed so that, for example, command
// ["a b"] and ["a", "b"] never collide.
func writeString(h hash.Hash, s string) {
	writeInt(h, int64(len(s)))
	h.Write([]byte(s))
}

func writeInt(h hash.Hash, v int64) {
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutVarint(b[:], v)])
}

func writeMap(h hash.Hash, m map[string]string) {
	writeInt(h, int64(len(m)))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		writeString(h, k)
		writeString(h, m[k])
	}
}

// LevelFor maps a plugin status to an event level. UNKNOWN (and any status
// outside the Nagios range) takes unknownLevel, which defaults to CRITICAL
// when unspecified.
func LevelFor(status unyov1.CheckStatus, unknownLevel unyov1.Level) unyov1.Level {
	switch status {
	case unyov1.CheckStatus_CHECK_STATUS_OK:
		return unyov1.Level_LEVEL_SUCCESS
	case unyov1.CheckStatus_CHECK_STATUS_WARNING:
		return unyov1.Level_LEVEL_WARNING
	case unyov1.CheckStatus_CHECK_STATUS_CRITICAL:
		return unyov1.Level_LEVEL_CRITICAL
	}
	if unknownLevel == unyov1.Level_LEVEL_UNSPECIFIED {
		return unyov1.Level_LEVEL_CRITICAL
	}
	return unknownLevel
}
