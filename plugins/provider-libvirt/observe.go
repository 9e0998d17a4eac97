package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

// watchRetry is how often Watch checks that its connection lives (and
// opens it again after libvirtd went away).
const watchRetry = 2 * time.Second

// lifecycle is one domain lifecycle event, handed from libvirt's event
// loop to the Watch goroutine (libvirt calls are not made on its loop).
type lifecycle struct {
	name  string
	event libvirt.DomainEventType
	// tries counts looks at a domain its Create has not finished yet.
	tries int
}

// Watch looks again at a domain whose event came while its Create was
// still running (defined and started, not yet marked started), every
// createRetry, createTries times, before it reports the resource absent.
const (
	createRetry = 250 * time.Millisecond
	createTries = 40
)

// Watch follows libvirt's domain lifecycle events (defined, started,
// stopped, crashed, undefined...) and sends the resource's state after
// each, starting with the current state of each watched resource. When the connection breaks (libvirtd restarted) it connects again
// and sends the current state of every watched resource, so that nothing
// that happened meanwhile goes unreported.
func (p *libvirtProvider) Watch(ctx context.Context, ids []string, send func(sdk.ResourceEvent) error) error {
	if _, _, err := p.connect(); err != nil {
		return err
	}
	watched := map[string]bool{}
	for _, id := range ids {
		watched[id] = true
	}
	events := make(chan lifecycle, 256)
	reconnect := false
	for {
		c, cfg, err := p.connect()
		if err == nil {
			err = p.follow(ctx, c, cfg, watched, reconnect, events, send)
		}
		if ctx.Err() != nil {
			return nil
		}
		if isSendError(err) {
			return err // the host stopped listening
		}
		reconnect = true
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchRetry):
		}
	}
}

// connLost is a connection that died under Watch.
type connLost struct{ err error }

func (e connLost) Error() string { return fmt.Sprintf("libvirt connection lost: %v", e.err) }

// sendError wraps a failure of send: the host stopped listening.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }

func isSendError(err error) bool {
	_, ok := err.(sendError)
	return ok
}

// follow registers for lifecycle events on c and forwards them until ctx
// ends or the connection dies.
func (p *libvirtProvider) follow(ctx context.Context, c *libvirt.Connect, cfg Config, watched map[string]bool, resend bool,
	events chan lifecycle, send func(sdk.ResourceEvent) error) error {
	cb, err := c.DomainEventLifecycleRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, e *libvirt.DomainEventLifecycle) {
		n, err := d.GetName()
		if err != nil {
			return
		}
		select {
		case events <- lifecycle{name: n, event: e.Event}:
		default: // the Watch goroutine is behind; the next event resends the state
		}
	})
	if err != nil {
		return connLost{fmt.Errorf("registering for domain events: %s", libvirtMessage(err))}
	}
	defer func() { _ = c.DomainEventDeregister(cb) }()
	// Once registered: the state of every watched resource that exists
	// (so the host knows where each stands, and that events now flow);
	// after a reconnect also DELETED for those that went meanwhile.
	for id := range watched {
		if err := p.sendCurrent(ctx, id, resend, send); err != nil {
			return sendError{err}
		}
	}
	names := map[string]string{} // domain name -> resource id
	for id := range watched {
		names[domainName(cfg.NamePrefix, id)] = id
	}
	tick := time.NewTicker(watchRetry)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if alive, err := c.IsAlive(); err != nil || !alive {
				return connLost{fmt.Errorf("libvirt at %s went away", cfg.URI)}
			}
		case e := <-events:
			id, ok := names[e.name]
			if !ok && len(watched) > 0 {
				continue
			}
			if !ok {
				id = p.idOf(e.name)
				if id == "" {
					continue
				}
			}
			if e.event == libvirt.DOMAIN_EVENT_UNDEFINED {
				if err := send(sdk.ResourceEvent{ID: id, State: sdk.Deleted, Reason: "domain undefined", At: time.Now()}); err != nil {
					return sendError{err}
				}
				continue
			}
			r, err := p.Get(ctx, id)
			switch {
			case err == nil:
			case isNotFound(err) && e.tries < createTries:
				e.tries++
				time.AfterFunc(createRetry, func() {
					select {
					case events <- e:
					default:
					}
				})
				continue
			case isNotFound(err):
				r = sdk.Resource{ID: id, State: sdk.Deleted, Reason: "no domain"}
			default:
				continue // libvirt is away: the reconnect reports it
			}
			if err := send(sdk.ResourceEvent{ID: id, State: r.State, Reason: r.Reason, At: time.Now()}); err != nil {
				return sendError{err}
			}
		}
	}
}

// idOf is the resource id in a domain's metadata, "" for a domain that is
// not unyo's.
func (p *libvirtProvider) idOf(dname string) string {
	c, _, err := p.connect()
	if err != nil {
		return ""
	}
	dom, err := c.LookupDomainByName(dname)
	if err != nil {
		return ""
	}
	defer dom.Free()
	d, err := domainDesc(dom)
	if err != nil {
		return ""
	}
	id, _, _, _ := decodeMeta(d)
	return id
}

// sendCurrent sends a resource's current state; a resource whose domain is
// gone is DELETED when absent says so, else not reported. When libvirt is
// away it sends nothing: the reconnect reports it later.
func (p *libvirtProvider) sendCurrent(ctx context.Context, id string, absent bool, send func(sdk.ResourceEvent) error) error {
	r, err := p.Get(ctx, id)
	switch {
	case err == nil:
	case isNotFound(err) && !absent:
		return nil
	case isNotFound(err):
		r = sdk.Resource{ID: id, State: sdk.Deleted, Reason: "no domain"}
	default:
		return nil
	}
	return send(sdk.ResourceEvent{ID: id, State: r.State, Reason: r.Reason, At: time.Now()})
}

// Stats reports the domain's CPU time, memory, block and interface
// counters as metrics of the compute (counters are cumulative since the
// domain started). A domain that does not run has none.
func (p *libvirtProvider) Stats(_ context.Context, id string) ([]sdk.Metric, error) {
	dom, _, err := p.find(id)
	if err != nil {
		return nil, err
	}
	defer dom.Free()
	if active, _ := dom.IsActive(); !active {
		return nil, nil
	}
	c, cfg, err := p.connect()
	if err != nil {
		return nil, err
	}
	var s libvirt.DomainStats
	st, err := c.GetAllDomainStats([]*libvirt.Domain{dom}, libvirt.DOMAIN_STATS_STATE|libvirt.DOMAIN_STATS_CPU_TOTAL|
		libvirt.DOMAIN_STATS_BALLOON|libvirt.DOMAIN_STATS_INTERFACE|libvirt.DOMAIN_STATS_BLOCK, 0)
	if err == nil && len(st) > 0 {
		s = st[0]
		for _, x := range st {
			_ = x.Domain.Free()
		}
	}
	if s.Cpu == nil || !s.Cpu.TimeSet || s.Balloon == nil {
		// Drivers whose bulk stats lack CPU or memory (the test driver):
		// the domain's basic info has both.
		info, err := dom.GetInfo()
		if err != nil {
			return nil, opError(cfg, err, "stats of %s", id)
		}
		if s.Cpu == nil || !s.Cpu.TimeSet {
			s.Cpu = &libvirt.DomainStatsCPU{TimeSet: true, Time: info.CpuTime}
		}
		if s.Balloon == nil {
			s.Balloon = &libvirt.DomainStatsBalloon{CurrentSet: true, Current: info.Memory, MaximumSet: true, Maximum: info.MaxMem}
		}
	}
	return statsMetrics(s), nil
}

// statsMetrics maps libvirt's domain stats onto the protocol's metrics,
// in the shape provider-exec and provider-docker report.
func statsMetrics(s libvirt.DomainStats) []sdk.Metric {
	zero := 0.0
	m := func(label string, v float64, unit string) sdk.Metric {
		return sdk.Metric{Label: label, Value: v, Unit: unit, Min: &zero}
	}
	var out []sdk.Metric
	if s.Cpu != nil && s.Cpu.TimeSet {
		out = append(out, m("cpu_seconds", float64(s.Cpu.Time)/1e9, "c"))
	}
	if b := s.Balloon; b != nil {
		// Without a balloon driver in the guest, rss (what QEMU holds of
		// the host) is what the VM costs; current is the flavor's memory.
		mem := float64(b.Current) * 1024
		if b.RssSet {
			mem = float64(b.Rss) * 1024
		}
		mm := m("rss", mem, "B")
		if b.MaximumSet && b.Maximum > 0 {
			mx := float64(b.Maximum) * 1024
			mm.Max = &mx
		}
		out = append(out, mm)
	}
	var rx, tx, rxp, txp, rd, wr float64
	for _, n := range s.Net {
		rx += float64(n.RxBytes)
		tx += float64(n.TxBytes)
		rxp += float64(n.RxPkts)
		txp += float64(n.TxPkts)
	}
	for _, b := range s.Block {
		rd += float64(b.RdBytes)
		wr += float64(b.WrBytes)
	}
	return append(out,
		m("net_rx_bytes", rx, "c"), m("net_tx_bytes", tx, "c"),
		m("net_rx_packets", rxp, "c"), m("net_tx_packets", txp, "c"),
		m("blkio_read_bytes", rd, "c"), m("blkio_write_bytes", wr, "c"))
}

// Fingerprint is libvirt's health, the hypervisor and the node's capacity.
// A node whose libvirt does not answer is unhealthy with the reason.
func (p *libvirtProvider) Fingerprint(context.Context) (sdk.Fingerprint, error) {
	c, cfg, err := p.connect()
	if err != nil {
		return sdk.Fingerprint{Healthy: false, Reason: err.Error()}, nil
	}
	ni, err := c.GetNodeInfo()
	if err != nil {
		return sdk.Fingerprint{Healthy: false, Reason: fmt.Sprintf("libvirt at %s does not answer: %s", cfg.URI, libvirtMessage(err))}, nil
	}
	hv, _ := c.GetType()
	attrs := map[string]string{"libvirt.uri": cfg.URI, "libvirt.hypervisor": hv, "libvirt.domain_type": cfg.DomainType,
		"cpu.model": ni.Model}
	if v, err := c.GetVersion(); err == nil {
		attrs["libvirt.hypervisor_version"] = versionString(v)
	}
	if v, err := c.GetLibVersion(); err == nil {
		attrs["libvirt.version"] = versionString(v)
	}
	fp := sdk.Fingerprint{Healthy: true, CPUs: int32(ni.Cpus), MemoryBytes: int64(ni.Memory) << 10, Attributes: attrs}
	// Disk: what the VMs' overlays can still take, the free space under
	// state_dir.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(cfg.StateDir, &fs); err == nil {
		fp.DiskBytes = wholeGiB(int64(fs.Bavail) * fs.Bsize)
	}
	return fp, nil
}

// wholeGiB rounds free space down to whole GiB. Free space moves with
// every write on the filesystem, and a fingerprint that changes is written
// to the node's record and wakes the cluster's placement at each heartbeat
// (every second, on a busy disk); flavors' disks are sized in GiB anyway.
func wholeGiB(b int64) int64 { return b &^ (1<<30 - 1) }

// versionString reads libvirt's major*1e6+minor*1e3+micro.
func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

func isNotFound(err error) bool { return errors.Is(err, sdk.ErrNotFound) }
