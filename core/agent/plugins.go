package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/plugins/host"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// pluginReplyGrace is how long past a check's timeout the agent waits for a
// plugin's answer: the plugin enforces the timeout itself and answers
// timed_out, which needs a moment to travel back.
const pluginReplyGrace = 2 * time.Second

// pluginCloseTimeout bounds shutting the plugins down when the agent stops.
const pluginCloseTimeout = 10 * time.Second

// newPlugins makes the plugin host for opts.Plugins; nothing is started
// until startPlugins. A host that cannot be made (which Validate of the
// configuration should have prevented) does not stop the agent: every
// configured plugin is reported failed and its checks answer UNKNOWN.
func (a *Agent) newPlugins() {
	a.pluginsReady = make(chan struct{}) // closed by startPlugins, always
	a.providerRestarts = make(chan string, 16)
	if len(a.opts.Plugins) == 0 {
		return
	}
	digests := ""
	if a.opts.DataDir != "" {
		digests = filepath.Join(a.opts.DataDir, "plugin-digests.json")
	}
	h, err := host.New(host.Config{
		DigestCache:   digests,
		Dirs:          a.opts.PluginDirs,
		PassEnv:       a.opts.PluginEnv,
		Plugins:       a.opts.Plugins,
		HostVersion:   a.opts.Version,
		Logger:        a.log,
		OnStateChange: a.pluginStateChanged,
	})
	if err != nil {
		a.pluginsErr = err
		a.log.Error("the plugin host cannot run; checks using plugins report UNKNOWN", "err", err)
		for _, pc := range a.opts.Plugins {
			a.pluginStateChanged(host.StateChange{Plugin: pc.ID(), From: host.StateStopped, To: host.StateFailed, Err: err, At: time.Now()})
		}
		return
	}
	a.plugins = h
}

// startPlugins starts the configured plugins. A plugin that is refused or
// fails to start is logged and raised as an event (through its state
// change); the agent and the other plugins go on.
func (a *Agent) startPlugins(ctx context.Context) {
	defer close(a.pluginsReady)
	if a.plugins == nil {
		return
	}
	if err := a.plugins.Start(ctx); err != nil {
		a.log.Error("some plugins did not start; their checks report UNKNOWN until they do", "err", err)
	}
}

// closePlugins stops the plugins; called before the spools close, so that
// the last state changes are still spooled.
func (a *Agent) closePlugins() {
	if a.plugins == nil {
		return
	}
	<-a.pluginsReady
	ctx, cancel := context.WithTimeout(context.Background(), pluginCloseTimeout)
	defer cancel()
	if err := a.plugins.Close(ctx); err != nil {
		a.log.Error("stopping the plugins failed", "err", err)
	}
}

// PluginCheckName is the check under which a plugin's state changes are
// raised: plugin-<kind>-<name>.
func PluginCheckName(kind, name string) string { return "plugin-" + kind + "-" + name }

// pluginStateChanged turns a supervisor state change into an event, spooled
// like a check result so that rules and alerts apply: success when the
// plugin runs, warning while it is degraded or waiting to restart, critical
// when it failed for good. Starting and stopping are not events.
func (a *Agent) pluginStateChanged(sc host.StateChange) {
	if kind, name, _ := strings.Cut(sc.Plugin, "/"); kind == providerKind && sc.From == host.StateStarting && sc.To == host.StateRunning {
		// A provider process that starts holds none of the agent's
		// resources until Recover hands them back (the first start's
		// are recovered when the runner starts; it skips these).
		select {
		case a.providerRestarts <- name:
		default: // a recovery is pending anyway
		}
	}
	code, what, ok := sc.Health()
	if !ok {
		return
	}
	st := unyov1.CheckStatus(code)
	kind, name, _ := strings.Cut(sc.Plugin, "/")
	out := fmt.Sprintf("plugin %s %s", sc.Plugin, what)
	if sc.Err != nil {
		out += ": " + sc.Err.Error()
	}
	first, long, _ := strings.Cut(out, "\n")
	at := sc.At
	if at.IsZero() {
		at = time.Now()
	}
	e := &unyov1.Event{
		Id:          uuid.Must(uuid.NewV7()).String(),
		Node:        a.opts.NodeName,
		Check:       PluginCheckName(kind, name),
		Sequence:    a.seq.Add(1),
		Occurrences: 1,
		Reissue:     durationpb.New(0),
		StartedAt:   timestamppb.New(at),
		Duration:    durationpb.New(0),
		Status:      st,
		ExitCode:    int32(st),
		Output:      first,
		LongOutput:  fmt.Sprintf("state %s -> %s\n%s", sc.From, sc.To, long),
		Level:       checks.LevelFor(st, unyov1.Level_LEVEL_CRITICAL),
	}
	e.LongOutput = strings.TrimRight(e.LongOutput, "\n")
	a.spoolResult(e)
}

// executePlugin runs one plugin check through its check plugin and maps
// the plugin's result to the same Event as a command's. A plugin that is
// not enabled, not running or dies during the call gives an UNKNOWN result
// naming it.
func (a *Agent) executePlugin(ctx context.Context, d checks.Definition) *unyov1.Event {
	e := a.newEvent(d)
	start := time.Now()
	id := "check/" + d.Plugin.Name
	unknown := func(format string, args ...any) *unyov1.Event {
		e.StartedAt = timestamppb.New(start)
		e.Duration = durationpb.New(time.Since(start))
		e.Status = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
		e.ExitCode = -1
		e.Output = fmt.Sprintf(format, args...)
		e.Level = checks.LevelFor(e.Status, d.UnknownLevel)
		return e
	}
	if a.pluginsErr != nil {
		return unknown("plugin %s is unavailable: the plugin host cannot run: %v", id, a.pluginsErr)
	}
	if a.plugins == nil {
		return unknown("plugin %s is not enabled on this node (agent.plugins.enabled)", id)
	}
	p, err := a.plugins.Plugin("check", d.Plugin.Name)
	if err != nil {
		return unknown("plugin %s is not enabled on this node (agent.plugins.enabled)", id)
	}
	// Right after the agent starts, wait for this plugin's first start
	// rather than report it unavailable; not for the others, one of which
	// may take its whole start timeout to fail.
	wait, cancelWait := context.WithTimeout(ctx, d.Timeout)
	select {
	case <-p.Started():
	case <-wait.Done():
	}
	cancelWait()
	if ctx.Err() != nil {
		return unknown("the agent is stopping")
	}
	target, err := d.Plugin.TargetStruct()
	if err != nil {
		return unknown("plugin %s: spec.plugin.target cannot be sent: %v", id, err)
	}
	cctx, cancel := context.WithTimeout(ctx, d.Timeout+pluginReplyGrace)
	defer cancel()
	res, err := p.Check(cctx, &pluginv1.RunRequest{Target: target, Timeout: durationpb.New(d.Timeout), CheckName: d.Name})
	if err != nil {
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			unknown("plugin %s did not answer within the check's timeout %s (and %s grace)", id, d.Timeout, pluginReplyGrace)
			e.TimedOut = true
			e.Status = d.TimeoutStatus
			e.Level = checks.LevelFor(e.Status, d.UnknownLevel)
			return e
		}
		return unknown("%v", err) // host errors name the plugin
	}
	mapPluginResult(e, res, start, a.opts.MaxOutput)
	if res.GetTimedOut() {
		e.Status = d.TimeoutStatus
		e.Output = strings.TrimSpace(fmt.Sprintf("check timed out after %s. %s", d.Timeout, e.Output))
	}
	e.Level = checks.LevelFor(e.Status, d.UnknownLevel)
	return e
}

// mapPluginResult copies a plugin's CheckResult into e: the first line of
// the output is the output, the rest the long output, as with a command.
// The output is cut at maxOutput (agent.max_output) here, not trusted to
// the plugin: a plugin not built with the SDK may send any size gRPC
// accepts.
func mapPluginResult(e *unyov1.Event, res *pluginv1.CheckResult, start time.Time, maxOutput int) {
	e.StartedAt = timestamppb.New(start)
	if s := res.GetStarted(); s != nil && s.IsValid() {
		e.StartedAt = s
	}
	e.Duration = durationpb.New(time.Since(start))
	if d := res.GetDuration(); d != nil && d.IsValid() {
		e.Duration = d
	}
	switch res.GetStatus() {
	case pluginv1.CheckStatus_CHECK_STATUS_OK:
		e.Status = unyov1.CheckStatus_CHECK_STATUS_OK
	case pluginv1.CheckStatus_CHECK_STATUS_WARNING:
		e.Status = unyov1.CheckStatus_CHECK_STATUS_WARNING
	case pluginv1.CheckStatus_CHECK_STATUS_CRITICAL:
		e.Status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	default:
		e.Status = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
	}
	// The Nagios exit code a command with this status would have had.
	e.ExitCode = int32(e.Status)
	output, cut := res.GetOutput(), false
	if maxOutput > 0 {
		output, cut = limits.Truncate(output, maxOutput)
	}
	first, long, _ := strings.Cut(output, "\n")
	e.Output, e.LongOutput = strings.TrimSpace(first), strings.TrimSpace(long)
	if res.GetStatus() == pluginv1.CheckStatus_CHECK_STATUS_UNSPECIFIED {
		e.Output = strings.TrimSpace("plugin gave no status. " + e.Output)
	}
	e.Truncated = res.GetOutputTruncated() || cut
	e.TimedOut = res.GetTimedOut()
	for _, m := range res.GetMetrics() {
		e.Perfdata = append(e.Perfdata, &unyov1.PerfData{
			Label: m.GetLabel(), Value: m.GetValue(), Uom: m.GetUnit(), Warn: m.GetWarn(), Crit: m.GetCrit(), Min: m.Min, Max: m.Max,
		})
	}
}

// pluginStatus is the plugins' state for the status endpoint.
func (a *Agent) pluginStatus() []host.Status {
	if a.plugins == nil {
		return nil
	}
	return a.plugins.Status()
}

// pluginStatusProto is the plugins' state for the cluster, sent with every
// heartbeat.
func (a *Agent) pluginStatusProto() []*unyov1.PluginStatus {
	return convert.PluginStatuses(a.pluginStatus())
}
