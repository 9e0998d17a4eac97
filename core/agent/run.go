package agent

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/checks/execute"
	"github.com/unyo-ops/unyo/checks/metricformat"
	"github.com/unyo-ops/unyo/checks/nagios"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// runCheck runs one check once and spools its result, and the samples of a
// check printing metrics.
func (a *Agent) runCheck(ctx context.Context, d checks.Definition) {
	e, samples := a.execute(ctx, d)
	if ctx.Err() != nil && !e.GetTimedOut() {
		return // the agent is stopping; a killed run is not a result
	}
	a.spoolResult(e)
	if err := a.spoolSamples(samples); err != nil {
		a.log.Error("spooling the metrics a check printed failed; they are lost", "check", e.GetCheck(), "samples", len(samples), "err", err)
	}
}

// spoolResult records one result for the status endpoint and spools it
// with its perfdata.
func (a *Agent) spoolResult(e *unyov1.Event) {
	a.status.result(e)
	data, err := proto.Marshal(e)
	if err != nil {
		a.log.Error("encoding a check result failed", "check", e.GetCheck(), "err", err)
		return
	}
	a.storeResult(data, e.GetCheck())
	if err := a.spoolPerfdata(e); err != nil {
		a.log.Error("spooling a check's perfdata failed; its samples are lost", "check", e.GetCheck(), "err", err)
	}
}

// newEvent starts a result of check d on this node.
func (a *Agent) newEvent(d checks.Definition) *unyov1.Event {
	return &unyov1.Event{
		Id:       uuid.Must(uuid.NewV7()).String(),
		Node:     a.opts.NodeName,
		Check:    d.Name,
		Sequence: a.seq.Add(1),
		// The check's labels; the cluster adds the node's over them.
		Labels: maps.Clone(d.Labels),
		// The pipeline applies these; carrying them spares it a lookup and
		// covers local checks, which the cluster does not know.
		Occurrences: int32(d.Occurrences),
		Reissue:     durationpb.New(d.Reissue),
	}
}

// execute turns one run of a Nagios-style command (or, for a plugin check,
// of its check plugin) into an Event, and the output of a command printing
// metrics (d.MetricsFormat) into samples.
func (a *Agent) execute(ctx context.Context, d checks.Definition) (*unyov1.Event, []metricformat.Sample) {
	if d.Plugin != nil {
		return a.executePlugin(ctx, d), nil
	}
	e := a.newEvent(d)
	path, err := execute.Resolve(d.Command[0], a.opts.CheckDirs)
	if err != nil {
		e.StartedAt = timestamppb.Now()
		e.Duration = durationpb.New(0)
		e.Status = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
		e.ExitCode = -1
		e.Output = err.Error()
		e.Level = checks.LevelFor(e.Status, d.UnknownLevel)
		return e, nil
	}
	maxOutput := a.opts.MaxOutput
	if d.MetricsFormat != checks.MetricsNagios {
		maxOutput = max(maxOutput, metricformat.MaxOutput)
	}
	res := execute.Run(ctx, execute.Command{
		Path: path, Args: d.Command[1:], Env: execute.Environ(a.checkEnv, d.Env), Timeout: d.Timeout, MaxOutput: maxOutput,
	})
	e.StartedAt = timestamppb.New(res.Started)
	e.Duration = durationpb.New(res.Duration)
	e.ExitCode = int32(res.ExitCode)
	e.Truncated = res.Truncated
	e.TimedOut = res.TimedOut
	e.Status = unyov1.CheckStatus(nagios.StatusFromExit(res.ExitCode))
	var samples []metricformat.Sample
	if d.MetricsFormat == checks.MetricsNagios {
		parse := nagios.Parse
		if res.Truncated {
			parse = nagios.ParseCut
		}
		out := parse(res.Output)
		e.Output = out.Text
		e.LongOutput = out.LongText
		for _, p := range out.Perfdata {
			e.Perfdata = append(e.Perfdata, &unyov1.PerfData{
				Label: p.Label, Value: p.Value, Uom: p.UOM, Warn: p.WarnText, Crit: p.CritText, Min: p.Min, Max: p.Max,
			})
		}
		if len(out.Errors) > 0 {
			e.LongOutput = strings.TrimLeft(e.LongOutput+"\nunyo: ignored malformed perfdata: "+strings.Join(out.Errors, "; "), "\n")
		}
	} else {
		// What a timed-out run printed before it was killed is kept too.
		r := metricformat.Parse(d.MetricsFormat, res.Output, metricformat.Options{Check: d.Name, RunTime: res.Started, Truncated: res.Truncated})
		var long []string
		e.Output, long = r.Report(d.MetricsFormat, res.Truncated)
		e.LongOutput = strings.Join(long, "\n")
		samples = r.Samples
	}
	switch {
	case res.TimedOut:
		e.Status = d.TimeoutStatus
		e.Output = strings.TrimSpace(fmt.Sprintf("check timed out after %s and was killed. %s", d.Timeout, e.Output))
	case res.Err != nil:
		e.Status = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
		e.Output = res.Err.Error()
	}
	e.Level = checks.LevelFor(e.Status, d.UnknownLevel)
	return e, samples
}
