package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

// watchedActions are the container events that change a resource's state.
func watchedActions() []events.Action {
	return []events.Action{
		events.ActionStart, events.ActionDie, events.ActionOOM, events.ActionRestart,
		events.ActionStop, events.ActionPause, events.ActionUnPause, events.ActionDestroy,
		events.ActionHealthStatusHealthy, events.ActionHealthStatusUnhealthy,
	}
}

// watchRetry bounds the wait before the event stream is opened again after
// dockerd went away.
const watchRetry = 2 * time.Second

// Watch follows Docker's event stream for the plugin's containers and
// sends the resource's state after each event that changes it (start, die,
// oom, health, destroy...). When the stream breaks (dockerd restarted) it
// reopens it and sends the current state of every watched resource, so
// that nothing that happened meanwhile goes unreported.
func (p *dockerProvider) Watch(ctx context.Context, ids []string, send func(sdk.ResourceEvent) error) error {
	cli, _, err := p.docker()
	if err != nil {
		return err
	}
	watched := map[string]bool{}
	for _, id := range ids {
		watched[id] = true
	}
	f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("label", labelID))
	for _, a := range watchedActions() {
		f.Add("event", string(a))
	}
	reconnect := false
	for {
		sctx, cancel := context.WithCancel(ctx)
		msgs, errs := cli.Events(sctx, events.ListOptions{Filters: f, Since: time.Now().Format(time.RFC3339Nano)})
		if reconnect {
			for id := range watched {
				if err := p.sendCurrent(ctx, id, "", send); err != nil {
					cancel()
					return err
				}
			}
		}
		err := p.follow(ctx, msgs, errs, watched, send)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !isStreamBreak(err) {
			return err
		}
		reconnect = true
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchRetry):
		}
	}
}

// follow forwards events until the stream breaks (returning its error) or
// send fails.
func (p *dockerProvider) follow(ctx context.Context, msgs <-chan events.Message, errs <-chan error, watched map[string]bool, send func(sdk.ResourceEvent) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return streamBreak{err}
		case m := <-msgs:
			id := m.Actor.Attributes[labelID]
			if id == "" || (len(watched) > 0 && !watched[id]) {
				continue
			}
			if m.Action == events.ActionDestroy {
				if err := send(sdk.ResourceEvent{ID: id, State: sdk.Deleted, Reason: "container removed", At: eventTime(m)}); err != nil {
					return err
				}
				continue
			}
			hint := ""
			if m.Action == events.ActionOOM {
				hint = "the kernel's OOM killer hit its memory limit"
			}
			if err := p.sendCurrent(ctx, id, hint, send); err != nil {
				return err
			}
		}
	}
}

// sendCurrent sends a resource's current state; hint replaces the reason
// of an event that says more than the container's state yet does (an oom
// event precedes the die that records it).
func (p *dockerProvider) sendCurrent(ctx context.Context, id, hint string, send func(sdk.ResourceEvent) error) error {
	r, err := p.Get(ctx, id)
	switch {
	case err == nil:
	case isNotFound(err):
		r = sdk.Resource{ID: id, State: sdk.Deleted, Reason: "no container"}
	default:
		return nil // dockerd is away; the reconnect reports it later
	}
	if hint != "" && r.State == sdk.Running {
		r.Reason = hint
	}
	return send(sdk.ResourceEvent{ID: id, State: r.State, Reason: r.Reason, At: time.Now()})
}

func isNotFound(err error) bool { return errors.Is(err, sdk.ErrNotFound) }

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

type streamBreak struct{ err error }

func (s streamBreak) Error() string { return fmt.Sprintf("docker event stream: %v", s.err) }

func isStreamBreak(err error) bool {
	_, ok := err.(streamBreak)
	return ok
}

func eventTime(m events.Message) time.Time {
	if m.TimeNano > 0 {
		return time.Unix(0, m.TimeNano)
	}
	return time.Now()
}

// Stats reports the container's CPU, memory, network and block I/O as
// metrics of the compute (counters are cumulative since the container
// started). A container that is not running has none.
func (p *dockerProvider) Stats(ctx context.Context, id string) ([]sdk.Metric, error) {
	ins, err := p.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if ins.State == nil || !ins.State.Running {
		return nil, nil
	}
	cli, _, err := p.docker()
	if err != nil {
		return nil, err
	}
	rd, err := cli.ContainerStatsOneShot(ctx, ins.ID)
	if err != nil {
		return nil, fmt.Errorf("provider docker: stats of %s: %w", id, err)
	}
	defer rd.Body.Close()
	var s container.StatsResponse
	if err := decodeJSON(rd.Body, &s); err != nil {
		return nil, fmt.Errorf("provider docker: stats of %s: %w", id, err)
	}
	return statsMetrics(s), nil
}

// statsMetrics maps Docker's stats onto the protocol's metrics, in the
// shape provider-exec reports (cpu_seconds, rss-like memory in bytes).
func statsMetrics(s container.StatsResponse) []sdk.Metric {
	zero := 0.0
	m := func(label string, v float64, unit string) sdk.Metric {
		return sdk.Metric{Label: label, Value: v, Unit: unit, Min: &zero}
	}
	var rx, tx, rd, wr float64
	for _, n := range s.Networks {
		rx += float64(n.RxBytes)
		tx += float64(n.TxBytes)
	}
	for _, e := range s.BlkioStats.IoServiceBytesRecursive {
		switch e.Op {
		case "Read", "read":
			rd += float64(e.Value)
		case "Write", "write":
			wr += float64(e.Value)
		}
	}
	// Page cache is reclaimable; what counts against the limit is the rest
	// (what `docker stats` shows).
	mem := float64(s.MemoryStats.Usage)
	if c, ok := s.MemoryStats.Stats["total_inactive_file"]; ok && float64(c) < mem {
		mem -= float64(c)
	} else if c, ok := s.MemoryStats.Stats["inactive_file"]; ok && float64(c) < mem {
		mem -= float64(c)
	}
	out := []sdk.Metric{
		m("cpu_seconds", float64(s.CPUStats.CPUUsage.TotalUsage)/1e9, "c"),
		m("rss", mem, "B"),
		m("net_rx_bytes", rx, "c"),
		m("net_tx_bytes", tx, "c"),
		m("blkio_read_bytes", rd, "c"),
		m("blkio_write_bytes", wr, "c"),
		m("pids", float64(s.PidsStats.Current), ""),
	}
	if s.MemoryStats.Limit > 0 {
		lim := float64(s.MemoryStats.Limit)
		out[1].Max = &lim
	}
	return out
}

// Fingerprint is dockerd's health, version and capacity. A node whose
// dockerd does not answer is unhealthy with the reason.
func (p *dockerProvider) Fingerprint(ctx context.Context) (sdk.Fingerprint, error) {
	cli, cfg, err := p.docker()
	if err != nil {
		return sdk.Fingerprint{Healthy: false, Reason: err.Error()}, nil
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return sdk.Fingerprint{Healthy: false, Reason: fmt.Sprintf("dockerd at %s does not answer: %v", cfg.Host, err)}, nil
	}
	attrs := map[string]string{
		"docker.version":        info.ServerVersion,
		"docker.api_version":    cli.ClientVersion(),
		"docker.storage_driver": info.Driver,
		"docker.cgroup_driver":  info.CgroupDriver,
		"docker.cgroup_version": info.CgroupVersion,
		"kernel":                info.KernelVersion,
	}
	fp := sdk.Fingerprint{Healthy: true, CPUs: int32(info.NCPU), MemoryBytes: info.MemTotal, Attributes: attrs}
	if info.ServerVersion == "" {
		fp.Healthy, fp.Reason = false, "dockerd answered without a version"
	}
	return fp, nil
}
