package ingest

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/limits"
)

// validate checks one event of b; now is the cluster's clock that an
// agent's times are judged against. Every event must be storable; an
// agent's result must also be a claim its node may make.
func validEvent(e *unyov1.Event, b Batch, now time.Time) error {
	switch {
	case e.GetId() == "" || len(e.GetId()) > 128 || !utf8.ValidString(e.GetId()):
		return errors.New("id: must be 1 to 128 characters")
	case b.Source == Agent && e.GetNode() != b.Node:
		return fmt.Errorf("node: %q differs from the reporting node %q", limits.Abbrev(e.GetNode()), b.Node)
	case b.Source == Agent && e.GetCheck() == LivenessCheck:
		return fmt.Errorf("check: %q is the cluster's own judgement of the node; agents may not report it", LivenessCheck)
	case b.Source == Agent && e.GetCheck() == PeerCheck:
		return fmt.Errorf("check: %q is a cluster's judgement of a peer cluster; agents may not report it", PeerCheck)
	case e.GetStartedAt() == nil:
		return errors.New("started_at: must be set")
	case e.GetLevel() == unyov1.Level_LEVEL_UNSPECIFIED:
		return errors.New("level: must be set")
	}
	if b.Source == Agent {
		// The cluster's own checks are named by code or by configuration
		// (a plugin's name) that is validated where it is written.
		if err := validate.Name(e.GetCheck()); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	if _, ok := unyov1.Level_name[int32(e.GetLevel())]; !ok {
		return fmt.Errorf("level: unknown value %d", e.GetLevel())
	}
	if _, ok := unyov1.CheckStatus_name[int32(e.GetStatus())]; !ok {
		return fmt.Errorf("status: unknown value %d", e.GetStatus())
	}
	if err := e.GetStartedAt().CheckValid(); err != nil {
		return fmt.Errorf("started_at: %w", err)
	}
	if b.Source == Agent {
		// The cluster's own events happen at its own clock (a test's, too).
		if err := limits.ResultTime("started_at", e.GetStartedAt().AsTime(), now); err != nil {
			return err
		}
	}
	if d := e.GetDuration(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return fmt.Errorf("duration: %s is not a run time; want a non-negative duration", d.AsDuration())
		}
	}
	if r := e.GetReissue(); r != nil {
		if err := r.CheckValid(); err != nil || r.AsDuration() < 0 {
			return fmt.Errorf("reissue: %s is not a window; want a non-negative duration", r.AsDuration())
		}
	}
	if e.GetOccurrences() < 0 {
		return fmt.Errorf("occurrences: %d is negative", e.GetOccurrences())
	}
	for i, p := range e.GetPerfdata() {
		if i == limits.MaxPerfdata {
			break // the rest is cut by capSizes
		}
		// Formatting the field path only on failure keeps the ingest path
		// free of allocations here.
		for _, f := range [...]struct{ name, v string }{{"label", p.GetLabel()}, {"uom", p.GetUom()}, {"warn", p.GetWarn()}, {"crit", p.GetCrit()}} {
			if len(f.v) > limits.MaxText {
				return limits.Text(fmt.Sprintf("perfdata[%d].%s", i, f.name), f.v, limits.MaxText)
			}
		}
	}
	return nil
}

// capSizes cuts a valid event's output, long output and perfdata to the
// cluster's limits and marks it truncated, as the agent marks what it cut:
// the result is still worth keeping, its tail is not.
func capSizes(e *unyov1.Event) {
	var notes []string
	if out, cut := limits.Truncate(e.GetOutput(), limits.MaxOutput); cut {
		notes = append(notes, fmt.Sprintf("unyo: the cluster cut output from %d to %d bytes, its limit", len(e.GetOutput()), limits.MaxOutput))
		e.Output = out
	}
	if out, cut := limits.Truncate(e.GetLongOutput(), limits.MaxOutput); cut {
		notes = append(notes, fmt.Sprintf("unyo: the cluster cut long_output from %d to %d bytes, its limit", len(e.GetLongOutput()), limits.MaxOutput))
		e.LongOutput = out
	}
	if n := len(e.GetPerfdata()); n > limits.MaxPerfdata {
		notes = append(notes, fmt.Sprintf("unyo: the cluster kept %d of %d perfdata items, its limit", limits.MaxPerfdata, n))
		e.Perfdata = e.Perfdata[:limits.MaxPerfdata]
	}
	if len(notes) == 0 {
		return
	}
	e.Truncated = true
	for _, n := range notes {
		e.LongOutput = strings.TrimLeft(e.LongOutput+"\n"+n, "\n")
	}
}
