// Command unyo-provider-libvirt is a provider plugin that runs each
// resource as a VM through libvirt (libvirt.org/go/libvirt, domain XML
// built with libvirtxml).
//
// A resource's state lives in libvirt: the domain is persistent, named
// name_prefix + the resource id, and carries unyo's resource id, the
// caller's owner labels and the resource config in its metadata element,
// so Get, List and Recover need nothing but libvirt. Beside it, under
// state_dir/NAME, are the VM's files: console.log (the serial console),
// disk.qcow2 (a copy-on-write overlay made with qemu-img) and a "started"
// marker written once the domain first started.
//
// The same plugin drives libvirt's test driver (test:///default in
// process, or test+unix:///default through a libvirtd: fast runs without
// guests), qemu:///embed?root=DIR (the QEMU driver inside the plugin, no
// daemon) and a libvirtd (qemu:///system).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	version = "1.0.0"
	name    = "libvirt"
	// handleVersion is the layout of Handle.State; bump it when it changes
	// and keep reading the old one.
	handleVersion = 1
	// reasonConsoleLines is how many console lines a failed resource's
	// reason carries.
	reasonConsoleLines = 8
	// consoleTail bounds how much of console.log is read for a reason.
	consoleTail = 16 << 10
	// startedMarker is written into the resource's directory once the
	// domain started: a defined domain without it is the remains of an
	// interrupted Create.
	startedMarker = "started"
)

// Config is plugin-wide.
type Config struct {
	// URI is libvirt's connection URI (default qemu:///system).
	URI string `json:"uri,omitempty"`
	// StateDir holds each resource's console log and disk overlay
	// (default /var/lib/unyo/libvirt).
	StateDir string `json:"state_dir,omitempty"`
	// ImagesDir is where relative image paths are looked up (default
	// /var/lib/unyo/images).
	ImagesDir string `json:"images_dir,omitempty"`
	// NamePrefix starts every domain name (default "unyo-").
	NamePrefix string `json:"name_prefix,omitempty"`
	// DomainType is qemu (software emulation, TCG: the default, and the
	// only one that boots guests on nested hosts like this project's) or
	// kvm.
	DomainType string `json:"domain_type,omitempty"`
	// Machine is the QEMU machine type ("" = the hypervisor's default).
	Machine string `json:"machine,omitempty"`
	// Emulator is the QEMU binary ("" = libvirt's choice).
	Emulator string `json:"emulator,omitempty"`
	// QemuImg is the qemu-img binary that makes disk overlays (default
	// qemu-img on the PATH).
	QemuImg string `json:"qemu_img,omitempty"`
}

// handleState is Handle.State (version 1).
type handleState struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

type libvirtProvider struct {
	mu   sync.Mutex
	cfg  Config
	conn *libvirt.Connect
	// events starts libvirt's event loop once per process (libvirt has
	// one per process: lifecycle events and embed mode's QEMU monitor run
	// on it).
	events sync.Once
}

func (*libvirtProvider) Info() sdk.Info {
	return sdk.Info{Name: name, Version: version, Description: "runs each resource as a VM through libvirt (QEMU; kernel+initramfs or copy-on-write disk images)"}
}

func (*libvirtProvider) ConfigSchema() string {
	return `{"type":"object","additionalProperties":false,"properties":{` +
		`"uri":{"type":"string","minLength":1},"state_dir":{"type":"string","minLength":1},"images_dir":{"type":"string","minLength":1},` +
		`"name_prefix":{"type":"string"},"domain_type":{"enum":["qemu","kvm"]},"machine":{"type":"string"},` +
		`"emulator":{"type":"string"},"qemu_img":{"type":"string"}}}`
}

func (p *libvirtProvider) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.URI == "" {
		cfg.URI = "qemu:///system"
	}
	if cfg.StateDir == "" {
		cfg.StateDir = "/var/lib/unyo/libvirt"
	}
	if cfg.ImagesDir == "" {
		cfg.ImagesDir = "/var/lib/unyo/images"
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "unyo-"
	}
	switch cfg.DomainType {
	case "":
		cfg.DomainType = "qemu"
	case "qemu", "kvm":
	default:
		return sdk.Invalid("domain_type", "%q is not qemu or kvm", cfg.DomainType)
	}
	if cfg.QemuImg == "" {
		cfg.QemuImg = "qemu-img"
	}
	if err := os.MkdirAll(cfg.StateDir, 0o750); err != nil {
		return sdk.Invalid("state_dir", "cannot be created: %v", err)
	}
	p.events.Do(startEventLoop)
	p.mu.Lock()
	old := p.conn
	p.cfg, p.conn = cfg, nil
	p.mu.Unlock()
	if old != nil {
		_, _ = old.Close()
	}
	// Connect now when libvirt is there; when it is not, every operation
	// tries again and says why (Fingerprint reports the node unhealthy).
	_, _, _ = p.connect()
	return nil
}

// startEventLoop registers libvirt's default event loop and runs it for
// the life of the process.
func startEventLoop() {
	if err := libvirt.EventRegisterDefaultImpl(); err != nil {
		fmt.Fprintf(os.Stderr, "provider libvirt: registering libvirt's event loop: %v\n", err)
		return
	}
	go func() {
		for {
			if err := libvirt.EventRunDefaultImpl(); err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
}

// connect returns the connection, opening it (again) when there is none or
// it died (libvirtd restarted).
func (p *libvirtProvider) connect() (*libvirt.Connect, Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.URI == "" {
		return nil, p.cfg, errors.New("provider libvirt: not configured")
	}
	if p.conn != nil {
		if alive, err := p.conn.IsAlive(); err == nil && alive {
			return p.conn, p.cfg, nil
		}
		_, _ = p.conn.Close()
		p.conn = nil
	}
	c, err := libvirt.NewConnect(p.cfg.URI)
	if err != nil {
		return nil, p.cfg, status.Errorf(codes.Unavailable, "provider libvirt: libvirt at %s is unreachable: %v", p.cfg.URI, libvirtMessage(err))
	}
	p.conn = c
	return c, p.cfg, nil
}

// libvirtMessage is the message of a libvirt error without its code
// dump.
func libvirtMessage(err error) string {
	var le libvirt.Error
	if errors.As(err, &le) && le.Message != "" {
		return le.Message
	}
	return err.Error()
}

// opError words a failed libvirt call for operators; when the call
// failed because the connection is gone (libvirtd stopped or restarted)
// it is UNAVAILABLE, like a failed connect, and the next call connects
// again.
func opError(cfg Config, err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var le libvirt.Error
	if errors.As(err, &le) && (le.Domain == libvirt.FROM_RPC || le.Domain == libvirt.FROM_REMOTE ||
		le.Code == libvirt.ERR_NO_CONNECT || le.Code == libvirt.ERR_RPC) {
		return status.Errorf(codes.Unavailable, "provider libvirt: libvirt at %s is unreachable (%s): %s", cfg.URI, what, libvirtMessage(err))
	}
	return fmt.Errorf("provider libvirt: %s: %s", what, libvirtMessage(err))
}

func isNoDomain(err error) bool {
	var le libvirt.Error
	return errors.As(err, &le) && le.Code == libvirt.ERR_NO_DOMAIN
}

func (p *libvirtProvider) Probe(context.Context) (bool, string) {
	c, _, err := p.connect()
	if err != nil {
		return false, err.Error()
	}
	if _, err := c.GetVersion(); err != nil {
		return false, fmt.Sprintf("libvirt does not answer: %v", libvirtMessage(err))
	}
	return true, ""
}

func (*libvirtProvider) ResourceType() string   { return "vm" }
func (*libvirtProvider) ResourceSchema() string { return resourceSchema }

func (*libvirtProvider) Validate(_ context.Context, config map[string]any) error {
	_, err := parseResource(config)
	return err
}

// layout is where resource name's files are.
func layout(cfg Config, name string) Layout {
	dir := filepath.Join(cfg.StateDir, name)
	return Layout{Dir: dir, Console: filepath.Join(dir, "console.log")}
}

func (p *libvirtProvider) Create(ctx context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	rc, err := parseResource(req.Config)
	if err != nil {
		return sdk.Resource{}, err
	}
	c, cfg, err := p.connect()
	if err != nil {
		return sdk.Resource{}, err
	}
	ni, err := c.GetNodeInfo()
	if err != nil {
		return sdk.Resource{}, opError(cfg, err, "reading the node's CPUs and memory")
	}
	if why := fits(rc, int(ni.Cpus), int64(ni.Memory)<<10); why != "" {
		return sdk.Resource{}, status.Errorf(codes.FailedPrecondition, "provider libvirt: %s", why)
	}
	img, err := resolveImage(ctx, cfg, rc.Image)
	if err != nil {
		return sdk.Resource{}, err
	}
	dname := domainName(cfg.NamePrefix, req.ID)
	// The SDK called Get first and found nothing usable: a domain of this
	// name is the remains of a Create interrupted before its start.
	if err := p.remove(c, cfg, req.ID, dname); err != nil {
		return sdk.Resource{}, err
	}
	l := layout(cfg, dname)
	if err := os.MkdirAll(l.Dir, 0o750); err != nil {
		return sdk.Resource{}, fmt.Errorf("provider libvirt: creating %s: %w", l.Dir, err)
	}
	fail := func(err error) (sdk.Resource, error) {
		// A failed Create leaves nothing behind.
		_ = p.remove(c, cfg, req.ID, dname)
		return sdk.Resource{}, err
	}
	if err := makeDisk(ctx, cfg, img, rc, &l); err != nil {
		return fail(status.Errorf(codes.FailedPrecondition, "provider libvirt: making the disk of %s: %v", req.ID, err))
	}
	tap := rc.Tap
	if tap == "" {
		tap = tapName(req.ID)
	}
	spec := Spec{ID: req.ID, Name: dname, DomainType: cfg.DomainType, Labels: req.Labels, Config: req.Config, RC: rc,
		Image: img, Layout: l, Tap: tap, TapManaged: !tapExists(tap), NodeCPUs: int(ni.Cpus),
		Emulator: cfg.Emulator, MachineType: cfg.Machine}
	doc, err := domainXML(spec)
	if err != nil {
		return fail(sdk.Invalid("config", "%v", err))
	}
	dom, err := c.DomainDefineXML(doc)
	if err != nil {
		return fail(opError(cfg, err, "defining domain %s", dname))
	}
	defer dom.Free()
	if err := dom.Create(); err != nil {
		return fail(status.Errorf(codes.FailedPrecondition, "provider libvirt: starting domain %s: %s", dname, libvirtMessage(err)))
	}
	if err := os.WriteFile(filepath.Join(l.Dir, startedMarker), nil, 0o640); err != nil {
		return fail(fmt.Errorf("provider libvirt: %w", err))
	}
	return p.Get(ctx, req.ID)
}

// fits says why a resource's shape does not fit the node, "" when it
// fits.
func fits(rc ResourceConfig, cpus int, memory int64) string {
	switch {
	case cpus > 0 && int(rc.vcpuCount()) > cpus:
		return fmt.Sprintf("the flavor asks for %d vCPUs and this node has %d", rc.vcpuCount(), cpus)
	case memory > 0 && rc.memory() > memory:
		return fmt.Sprintf("the flavor asks for %d MiB of memory and this node has %d MiB", rc.memory()>>20, memory>>20)
	}
	return ""
}

// remove destroys and undefines the domain of id (if it is one of id's)
// and removes its directory: disk, console log, marker.
func (p *libvirtProvider) remove(c *libvirt.Connect, cfg Config, id, dname string) error {
	dom, err := c.LookupDomainByName(dname)
	switch {
	case isNoDomain(err):
	case err != nil:
		return opError(cfg, err, "looking up domain %s", dname)
	default:
		defer dom.Free()
		if d, err := domainDesc(dom); err == nil {
			if got, _, _, ok := decodeMeta(d); ok && got != id {
				return status.Errorf(codes.FailedPrecondition, "provider libvirt: domain %s belongs to resource %q, not %q", dname, got, id)
			}
		}
		if active, _ := dom.IsActive(); active {
			if err := dom.Destroy(); err != nil && !isNoDomain(err) {
				if active, _ := dom.IsActive(); active {
					return opError(cfg, err, "destroying domain %s", dname)
				}
			}
		}
		// No NVRAM flag: the domains boot SeaBIOS or a kernel, never
		// UEFI, and the test driver refuses the flag.
		if err := dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA); err != nil && !isNoDomain(err) {
			return opError(cfg, err, "undefining domain %s", dname)
		}
	}
	if err := os.RemoveAll(layout(cfg, dname).Dir); err != nil {
		return fmt.Errorf("provider libvirt: removing the files of %s: %w", id, err)
	}
	return nil
}

func domainDesc(dom *libvirt.Domain) (*libvirtxml.Domain, error) {
	doc, err := dom.GetXMLDesc(0)
	if err != nil {
		return nil, err
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		return nil, err
	}
	return &d, nil
}

// find returns the domain of resource id, ErrNotFound if there is none.
// The caller frees it.
func (p *libvirtProvider) find(id string) (*libvirt.Domain, *libvirtxml.Domain, error) {
	c, cfg, err := p.connect()
	if err != nil {
		return nil, nil, err
	}
	return lookup(c, cfg, id, domainName(cfg.NamePrefix, id))
}

func lookup(c *libvirt.Connect, cfg Config, id, dname string) (*libvirt.Domain, *libvirtxml.Domain, error) {
	dom, err := c.LookupDomainByName(dname)
	if isNoDomain(err) {
		return nil, nil, fmt.Errorf("provider libvirt: no domain for %s: %w", id, sdk.ErrNotFound)
	}
	if err != nil {
		return nil, nil, opError(cfg, err, "looking up domain %s", dname)
	}
	d, err := domainDesc(dom)
	if err != nil {
		dom.Free()
		if isNoDomain(err) {
			return nil, nil, fmt.Errorf("provider libvirt: no domain for %s: %w", id, sdk.ErrNotFound)
		}
		return nil, nil, opError(cfg, err, "reading domain %s", dname)
	}
	if got, _, _, ok := decodeMeta(d); !ok || got != id {
		dom.Free()
		return nil, nil, fmt.Errorf("provider libvirt: domain %s is not unyo's resource %s: %w", dname, id, sdk.ErrNotFound)
	}
	if _, err := os.Stat(filepath.Join(layout(cfg, dname).Dir, startedMarker)); err != nil {
		// Defined but never started: its Create was interrupted. Reported
		// as absent so that the next Create replaces it.
		dom.Free()
		return nil, nil, fmt.Errorf("provider libvirt: domain %s was never started: %w", dname, sdk.ErrNotFound)
	}
	return dom, d, nil
}

func (p *libvirtProvider) Get(_ context.Context, id string) (sdk.Resource, error) {
	dom, d, err := p.find(id)
	if err != nil {
		return sdk.Resource{}, err
	}
	defer dom.Free()
	_, cfg, _ := p.connect()
	return resource(dom, d, cfg)
}

var stateNames = map[libvirt.DomainState]string{
	libvirt.DOMAIN_NOSTATE: "nostate", libvirt.DOMAIN_RUNNING: "running", libvirt.DOMAIN_BLOCKED: "blocked",
	libvirt.DOMAIN_PAUSED: "paused", libvirt.DOMAIN_SHUTDOWN: "shutdown", libvirt.DOMAIN_SHUTOFF: "shutoff",
	libvirt.DOMAIN_CRASHED: "crashed", libvirt.DOMAIN_PMSUSPENDED: "pmsuspended",
}

var shutoffReasons = map[libvirt.DomainShutoffReason]string{
	libvirt.DOMAIN_SHUTOFF_UNKNOWN: "unknown", libvirt.DOMAIN_SHUTOFF_SHUTDOWN: "shutdown",
	libvirt.DOMAIN_SHUTOFF_DESTROYED: "destroyed", libvirt.DOMAIN_SHUTOFF_CRASHED: "crashed",
	libvirt.DOMAIN_SHUTOFF_MIGRATED: "migrated", libvirt.DOMAIN_SHUTOFF_SAVED: "saved",
	libvirt.DOMAIN_SHUTOFF_FAILED: "failed", libvirt.DOMAIN_SHUTOFF_FROM_SNAPSHOT: "from snapshot",
	libvirt.DOMAIN_SHUTOFF_DAEMON: "libvirt stopped it",
}

// resource builds the resource from a domain.
func resource(dom *libvirt.Domain, d *libvirtxml.Domain, cfg Config) (sdk.Resource, error) {
	id, labels, config, _ := decodeMeta(d)
	st, reason, err := dom.GetState()
	if err != nil {
		return sdk.Resource{}, opError(cfg, err, "state of domain %s", d.Name)
	}
	l := layout(cfg, d.Name)
	r := sdk.Resource{ID: id, Labels: labels, Config: config, Handle: sdk.NewHandle(handleVersion, handleState{UUID: d.UUID, Name: d.Name}),
		Attributes: map[string]string{"domain": d.Name, "uuid": d.UUID, "console_log": l.Console, "domain_type": d.Type}}
	if d.Devices != nil && len(d.Devices.Interfaces) > 0 && d.Devices.Interfaces[0].Target != nil {
		r.Attributes["tap"] = d.Devices.Interfaces[0].Target.Dev
		if d.Devices.Interfaces[0].MAC != nil {
			r.Attributes["mac"] = d.Devices.Interfaces[0].MAC.Address
		}
	}
	if a, ok := config["address"].(string); ok && a != "" {
		r.Attributes["address"] = a
	}
	if fi, err := os.Stat(filepath.Join(l.Dir, startedMarker)); err == nil {
		r.CreatedAt = fi.ModTime()
	}
	o := observed{State: stateNames[st]}
	if st == libvirt.DOMAIN_SHUTOFF {
		o.Reason = shutoffReasons[libvirt.DomainShutoffReason(reason)]
	} else {
		o.Reason = fmt.Sprint(reason)
	}
	if st == libvirt.DOMAIN_SHUTOFF || st == libvirt.DOMAIN_CRASHED {
		o.Console, o.Panic = consoleReason(readTail(l.Console, consoleTail), reasonConsoleLines)
	}
	r.State, r.Reason = stateOf(o)
	return r, nil
}

// readTail returns up to n bytes of the end of a file, "" if unreadable.
func readTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

func (p *libvirtProvider) Delete(_ context.Context, id string, _ time.Duration) (bool, error) {
	c, cfg, err := p.connect()
	if err != nil {
		return false, err
	}
	dname := domainName(cfg.NamePrefix, id)
	dom, err := c.LookupDomainByName(dname)
	existed := err == nil
	if err != nil && !isNoDomain(err) {
		return false, opError(cfg, err, "looking up domain %s", dname)
	}
	if existed {
		d, derr := domainDesc(dom)
		dom.Free()
		if derr == nil {
			if got, _, _, ok := decodeMeta(d); !ok || got != id {
				return false, nil // another's domain: not ours to delete
			}
		}
	}
	// Destroy at once: a VM has nothing to flush that its flavor's disk
	// overlay would keep (the overlay is removed with it).
	if err := p.remove(c, cfg, id, dname); err != nil {
		return existed, err
	}
	return existed, nil
}

// List returns the resources whose domains carry all the labels.
func (p *libvirtProvider) List(_ context.Context, labels map[string]string) ([]sdk.Resource, error) {
	c, cfg, err := p.connect()
	if err != nil {
		return nil, err
	}
	doms, err := c.ListAllDomains(0)
	if err != nil {
		return nil, opError(cfg, err, "listing domains")
	}
	var out []sdk.Resource
	for i := range doms {
		dom := &doms[i]
		d, err := domainDesc(dom)
		if err != nil {
			dom.Free()
			continue // undefined meanwhile
		}
		id, have, _, ok := decodeMeta(d)
		if ok && matches(have, labels) && d.Name == domainName(cfg.NamePrefix, id) {
			if _, err := os.Stat(filepath.Join(layout(cfg, d.Name).Dir, startedMarker)); err == nil {
				if r, err := resource(dom, d, cfg); err == nil {
					out = append(out, r)
				}
			}
		}
		dom.Free()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Recover finds the domain from the stored handle (by UUID, then by name,
// then by the id's name) after the plugin, libvirtd or the host restarted,
// and starts it again when the restart left it shut off.
func (p *libvirtProvider) Recover(_ context.Context, id string, h sdk.Handle) (sdk.Resource, error) {
	hs, err := sdk.ReadHandle(name, h, handleVersion, func(hs handleState) bool { return hs.UUID != "" || hs.Name != "" })
	if err != nil {
		return sdk.Resource{}, err
	}
	c, cfg, err := p.connect()
	if err != nil {
		return sdk.Resource{}, err
	}
	dname := hs.Name
	if hs.UUID != "" {
		if dom, err := c.LookupDomainByUUIDString(hs.UUID); err == nil {
			if n, err := dom.GetName(); err == nil {
				dname = n
			}
			dom.Free()
		}
	}
	if dname == "" {
		dname = domainName(cfg.NamePrefix, id)
	}
	dom, d, err := lookup(c, cfg, id, dname)
	if err != nil && dname != domainName(cfg.NamePrefix, id) {
		dom, d, err = lookup(c, cfg, id, domainName(cfg.NamePrefix, id))
	}
	if err != nil {
		return sdk.Resource{}, err
	}
	defer dom.Free()
	// Shut off with no reason (the host restarted under it) or by libvirt
	// itself: it was running when unyo last saw it, so start it again. A
	// VM that stopped by itself or was destroyed stays as it is.
	if st, reason, err := dom.GetState(); err == nil && st == libvirt.DOMAIN_SHUTOFF {
		if r := libvirt.DomainShutoffReason(reason); r == libvirt.DOMAIN_SHUTOFF_UNKNOWN || r == libvirt.DOMAIN_SHUTOFF_DAEMON {
			if err := dom.Create(); err != nil {
				return sdk.Resource{}, opError(cfg, err, "starting domain %s again after recovery", dname)
			}
		}
	}
	return resource(dom, d, cfg)
}

func main() {
	sdk.Serve(&libvirtProvider{})
}
