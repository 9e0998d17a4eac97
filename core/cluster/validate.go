package cluster

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
)

// maxPlugins bounds the plugin statuses one node reports.
const maxPlugins = 256

// validNode checks what an agent says about its node before it is stored.
func validNode(n *unyov1.Node) error {
	if err := checks.ValidateName(n.GetName()); err != nil {
		return fmt.Errorf("node.name: %w", err)
	}
	if err := limits.Labels("node.labels", n.GetLabels()); err != nil {
		return err
	}
	if err := limits.Address("node.address", n.GetAddress()); err != nil {
		return err
	}
	for _, f := range [...]struct{ field, v string }{{"node.agent_version", n.GetAgentVersion()}, {"node.os", n.GetOs()}, {"node.kernel", n.GetKernel()}} {
		if err := limits.Text(f.field, f.v, limits.MaxText); err != nil {
			return err
		}
	}
	return validPlugins("node.plugins", n.GetPlugins())
}

func validPlugins(field string, ps []*unyov1.PluginStatus) error {
	if len(ps) > maxPlugins {
		return fmt.Errorf("%s: %d plugin statuses, at most %d are allowed", field, len(ps), maxPlugins)
	}
	for i, p := range ps {
		for _, f := range [...]struct{ name, v string }{{"kind", p.GetKind()}, {"name", p.GetName()}, {"version", p.GetVersion()}, {"state", p.GetState()}, {"last_error", p.GetLastError()}} {
			if len(f.v) > limits.MaxText {
				return limits.Text(fmt.Sprintf("%s[%d].%s", field, i, f.name), f.v, limits.MaxText)
			}
		}
	}
	return nil
}

// validResult checks one reported result; now is the cluster's clock that
// its times are judged against.
func validResult(e *unyov1.Event, node string, now time.Time) error {
	switch {
	case e.GetId() == "" || len(e.GetId()) > 128 || !utf8.ValidString(e.GetId()):
		return errors.New("id: must be 1 to 128 characters")
	case e.GetNode() != node:
		return fmt.Errorf("node: %q differs from the reporting node %q", limits.Abbrev(e.GetNode()), node)
	case e.GetCheck() == livenessCheck:
		return fmt.Errorf("check: %q is the cluster's own judgement of the node; agents may not report it", livenessCheck)
	case e.GetStartedAt() == nil:
		return errors.New("started_at: must be set")
	case e.GetLevel() == unyov1.Level_LEVEL_UNSPECIFIED:
		return errors.New("level: must be set")
	}
	if err := checks.ValidateName(e.GetCheck()); err != nil {
		return fmt.Errorf("check: %w", err)
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
	if err := limits.ResultTime("started_at", e.GetStartedAt().AsTime(), now); err != nil {
		return err
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
			break // the rest is cut by capResult
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

// capResult cuts a valid result's output, long output and perfdata to the
// cluster's limits and marks it truncated, as the agent marks what it cut:
// the result is still worth keeping, its tail is not.
func capResult(e *unyov1.Event) {
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

// required refuses a request whose field is empty, naming the field.
func required(field, v string) error {
	if err := limits.Required(field, v); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return nil
}
