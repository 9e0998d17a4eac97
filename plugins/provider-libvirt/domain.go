package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// Defaults of a resource whose flavor does not say.
const (
	defaultVCPUs       = 1
	defaultMemoryBytes = 256 << 20
	// minMemoryBytes: below this no Linux guest boots.
	minMemoryBytes = 32 << 20
	// defaultGateway is the guest's gateway inside its port namespace
	// (seed 001: every port namespace answers on 169.254.1.1).
	defaultGateway = "169.254.1.1"
	// baseCmdline is every kernel-image guest's command line before the
	// image's and the resource's own: the console on the serial port
	// (logged to console.log), quiet (every line costs time on an
	// emulated serial port; a panic still prints), and a panic that
	// reboots at once, which on_reboot=destroy turns into a stop the
	// plugin reports as FAILED (a panicked guest that only hangs would
	// look running).
	baseCmdline = "console=ttyS0 quiet panic=-1"
)

// CPU policies of a flavor (unyov1 Flavor.cpu_policy).
const (
	cpuShared = "shared"
	cpuPinned = "pinned"
)

// ResourceConfig is one VM. The fields the agent fills from an assignment
// (core/agent/assignments.go facts): image (image_source), address, vcpus,
// memory_bytes and disk_bytes (the flavor's shape).
type ResourceConfig struct {
	// Image is a disk image file (qcow2 or raw; the VM boots from a
	// copy-on-write qcow2 overlay over it) or a directory holding a
	// kernel (vmlinux or vmlinuz) and an initramfs (initrd.gz, initrd.img
	// or initrd), optionally a file cmdline; relative paths are under the
	// plugin's images_dir.
	Image string `json:"image"`
	// Address is the compute's address; kernel images get it on the
	// command line as unyo.ip= (with unyo.gw=, the gateway).
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// Cmdline is appended to a kernel image's command line.
	Cmdline     string  `json:"cmdline,omitempty"`
	VCPUs       float64 `json:"vcpus,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// DiskBytes is the virtual size of the VM's disk: the overlay of a
	// disk image grows to it; a kernel image gets an empty scratch disk
	// of this size.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// CPUPolicy is the flavor's: "pinned" pins each vCPU to one node CPU
	// of CPUSet (all the node's CPUs when CPUSet is empty), round robin.
	CPUPolicy string `json:"cpu_policy,omitempty"`
	CPUSet    string `json:"cpuset,omitempty"`
	// Tap names the host tap device of the VM's interface (at most 15
	// characters); by default it is derived from the resource id.
	Tap string `json:"tap,omitempty"`
}

const resourceSchema = `{"type":"object","required":["image"],"additionalProperties":false,"properties":{` +
	`"image":{"type":"string","minLength":1},"address":{"type":"string"},"gateway":{"type":"string"},` +
	`"cmdline":{"type":"string"},"vcpus":{"type":"number","minimum":0},` +
	`"memory_bytes":{"type":"integer","minimum":0},"disk_bytes":{"type":"integer","minimum":0},` +
	`"cpu_policy":{"enum":["","shared","pinned"]},"cpuset":{"type":"string"},` +
	`"tap":{"type":"string","maxLength":15}}}`

func parseResource(m map[string]any) (ResourceConfig, error) {
	var rc ResourceConfig
	if err := sdk.Decode(m, &rc); err != nil {
		return rc, err
	}
	switch {
	case rc.Image == "":
		return rc, sdk.Invalid("image", "is required: a disk image or a kernel+initramfs directory (relative to images_dir)")
	case slices.Contains(strings.Split(rc.Image, "/"), ".."):
		return rc, sdk.Invalid("image", "%q must not leave images_dir (..)", rc.Image)
	case rc.VCPUs < 0:
		return rc, sdk.Invalid("vcpus", "must not be negative")
	case rc.MemoryBytes < 0:
		return rc, sdk.Invalid("memory_bytes", "must not be negative")
	case rc.MemoryBytes > 0 && rc.MemoryBytes < minMemoryBytes:
		return rc, sdk.Invalid("memory_bytes", "%d is below the %d MiB a guest needs", rc.MemoryBytes, minMemoryBytes>>20)
	case rc.DiskBytes < 0:
		return rc, sdk.Invalid("disk_bytes", "must not be negative")
	case rc.CPUPolicy != "" && rc.CPUPolicy != cpuShared && rc.CPUPolicy != cpuPinned:
		return rc, sdk.Invalid("cpu_policy", "%q is not shared or pinned", rc.CPUPolicy)
	case rc.Tap != "" && !validIfname(rc.Tap):
		return rc, sdk.Invalid("tap", "%q is not a network device name (1-15 characters, no /, : or space)", rc.Tap)
	}
	if rc.CPUSet != "" {
		if _, err := parseCPUSet(rc.CPUSet); err != nil {
			return rc, sdk.Invalid("cpuset", "%v", err)
		}
	}
	if rc.Address != "" {
		if _, err := guestAddress(rc.Address); err != nil {
			return rc, sdk.Invalid("address", "%v", err)
		}
	}
	if rc.Gateway != "" {
		if _, err := netip.ParseAddr(rc.Gateway); err != nil {
			return rc, sdk.Invalid("gateway", "%v", err)
		}
	}
	return rc, nil
}

// guestAddress accepts an address or a prefix and returns it as a prefix
// (a bare address is a /32 or /128: each compute has its own link).
func guestAddress(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an address nor a prefix", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// validIfname says whether s can name a Linux network device.
func validIfname(s string) bool {
	return len(s) > 0 && len(s) <= 15 && !strings.ContainsAny(s, "/: \t\n") && s != "." && s != ".."
}

// parseCPUSet reads libvirt's cpuset syntax ("0-3,6,^2") into a sorted
// list of CPUs.
func parseCPUSet(s string) ([]int, error) {
	in, out := map[int]bool{}, map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		neg := strings.HasPrefix(part, "^")
		part = strings.TrimPrefix(part, "^")
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not a CPU list like 0-3,6", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a CPU list like 0-3,6", s)
			}
		}
		for c := a; c <= b; c++ {
			if neg {
				out[c] = true
			} else {
				in[c] = true
			}
		}
	}
	var cpus []int
	for c := range in {
		if !out[c] {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	if len(cpus) == 0 {
		return nil, fmt.Errorf("%q names no CPU", s)
	}
	return cpus, nil
}

// vcpuCount is the flavor's vCPUs as a whole number of vCPUs (a VM has no
// half CPU: 0.5 becomes 1).
func (rc ResourceConfig) vcpuCount() uint {
	if rc.VCPUs <= 0 {
		return defaultVCPUs
	}
	return uint(math.Ceil(rc.VCPUs))
}

func (rc ResourceConfig) memory() int64 {
	if rc.MemoryBytes <= 0 {
		return defaultMemoryBytes
	}
	return rc.MemoryBytes
}

// Image is a resolved image: a disk or a kernel with its initramfs.
type Image struct {
	// Disk is the base disk image, DiskFormat its format (qcow2, raw)
	// and DiskBytes its virtual size.
	Disk       string
	DiskFormat string
	DiskBytes  int64
	// Kernel, Initrd and Cmdline form a direct kernel boot.
	Kernel  string
	Initrd  string
	Cmdline string
}

// Layout is where a resource's files are: its directory under state_dir.
type Layout struct {
	Dir     string
	Console string
	// Overlay is the VM's disk: a qcow2 over the image's disk, or an
	// empty scratch disk for a kernel image with disk_bytes; "" for none.
	Overlay string
}

// Spec is everything the domain XML is made of.
type Spec struct {
	ID          string
	Name        string
	DomainType  string // qemu (TCG) or kvm
	Labels      map[string]string
	Config      map[string]any
	RC          ResourceConfig
	Image       Image
	Layout      Layout
	Tap         string
	TapManaged  bool
	NodeCPUs    int
	Emulator    string
	MachineType string
}

// xmlNS is the namespace of unyo's metadata element in a domain.
const xmlNS = "https://unyo.dev/xmlns/provider-libvirt/1"

// domainMeta is the metadata element: unyo's resource id, the caller's
// (owner) labels and the resource config, so that Get, List and Recover
// need nothing but libvirt.
type domainMeta struct {
	XMLName xml.Name    `xml:"https://unyo.dev/xmlns/provider-libvirt/1 resource"`
	ID      string      `xml:"id"`
	Labels  []metaLabel `xml:"label"`
	Config  string      `xml:"config"`
}

type metaLabel struct {
	Key   string `xml:"key,attr"`
	Value string `xml:"value,attr"`
}

func encodeMeta(id string, labels map[string]string, config map[string]any) (string, error) {
	cfg, err := json.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("the resource config is not JSON: %w", err)
	}
	m := domainMeta{ID: id, Config: string(cfg)}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		m.Labels = append(m.Labels, metaLabel{Key: k, Value: labels[k]})
	}
	b, err := xml.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeMeta reads unyo's element out of a domain's metadata; ok=false
// when the domain is not one of unyo's.
func decodeMeta(d *libvirtxml.Domain) (id string, labels map[string]string, config map[string]any, ok bool) {
	if d.Metadata == nil {
		return "", nil, nil, false
	}
	// The metadata may hold other applications' elements beside unyo's.
	dec := xml.NewDecoder(strings.NewReader(d.Metadata.XML))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", nil, nil, false
		}
		se, isStart := tok.(xml.StartElement)
		if !isStart || se.Name.Space != xmlNS || se.Name.Local != "resource" {
			continue
		}
		var m domainMeta
		if err := dec.DecodeElement(&m, &se); err != nil || m.ID == "" {
			return "", nil, nil, false
		}
		labels = make(map[string]string, len(m.Labels))
		for _, l := range m.Labels {
			labels[l.Key] = l.Value
		}
		_ = json.Unmarshal([]byte(m.Config), &config)
		return m.ID, labels, config, true
	}
}

// domainXML builds the domain of a resource. Pure: every fact about the
// node (its CPUs, whether the tap exists) is in the spec.
func domainXML(s Spec) (string, error) {
	meta, err := encodeMeta(s.ID, s.Labels, s.Config)
	if err != nil {
		return "", err
	}
	vcpus := s.RC.vcpuCount()
	d := &libvirtxml.Domain{
		Type:     s.DomainType,
		Name:     s.Name,
		Metadata: &libvirtxml.DomainMetadata{XML: meta},
		Memory:   &libvirtxml.DomainMemory{Value: uint(s.RC.memory() >> 10), Unit: "KiB"},
		VCPU:     &libvirtxml.DomainVCPU{Placement: "static", Value: vcpus},
		OS: &libvirtxml.DomainOS{
			Type: &libvirtxml.DomainOSType{Arch: "x86_64", Machine: s.MachineType, Type: "hvm"},
		},
		// A guest that powers off, reboots or crashes ends: the plugin
		// reports it (STOPPED or FAILED) and the service's policy decides
		// what follows, not a reboot loop inside the node.
		OnPoweroff: "destroy",
		OnReboot:   "destroy",
		OnCrash:    "destroy",
		Devices:    &libvirtxml.DomainDeviceList{Emulator: s.Emulator},
	}
	if pins, err := vcpuPins(s.RC, s.NodeCPUs); err != nil {
		return "", err
	} else if len(pins) > 0 {
		d.CPUTune = &libvirtxml.DomainCPUTune{VCPUPin: pins}
	}
	if s.Image.Kernel != "" {
		d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = s.Image.Kernel, s.Image.Initrd, kernelCmdline(s.RC, s.Image)
	} else {
		d.OS.BootDevices = []libvirtxml.DomainBootDevice{{Dev: "hd"}}
	}
	if s.Layout.Overlay != "" {
		d.Devices.Disks = []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.Layout.Overlay}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}}
	}
	iface := libvirtxml.DomainInterface{
		MAC:    &libvirtxml.DomainInterfaceMAC{Address: macAddress(s.ID)},
		Source: &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}},
		Target: &libvirtxml.DomainInterfaceTarget{Dev: s.Tap},
		Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
	}
	if !s.TapManaged {
		// The tap exists already (made by whoever wires the port): libvirt
		// uses it as it is and does not delete it.
		iface.Target.Managed = "no"
	}
	d.Devices.Interfaces = []libvirtxml.DomainInterface{iface}
	port := uint(0)
	d.Devices.Serials = []libvirtxml.DomainSerial{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainSerialTarget{Port: &port},
		Log:    &libvirtxml.DomainChardevLog{File: s.Layout.Console, Append: "on"},
	}}
	d.Devices.Consoles = []libvirtxml.DomainConsole{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port},
	}}
	// No balloon: memory is the flavor's, fixed; and one device less to
	// probe at boot.
	d.Devices.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "none"}
	return d.Marshal()
}

// kernelCmdline is the base, the image's own, the address and gateway,
// and the resource's extra arguments, in that order (a later argument wins
// in the kernel and in the guest's init).
func kernelCmdline(rc ResourceConfig, img Image) string {
	parts := []string{baseCmdline}
	if img.Cmdline != "" {
		parts = append(parts, img.Cmdline)
	}
	if rc.Address != "" {
		p, _ := guestAddress(rc.Address)
		gw := rc.Gateway
		if gw == "" {
			gw = defaultGateway
		}
		parts = append(parts, "unyo.ip="+p.String(), "unyo.gw="+gw)
	}
	if rc.Cmdline != "" {
		parts = append(parts, rc.Cmdline)
	}
	return strings.Join(parts, " ")
}

// vcpuPins pins vCPU i of a pinned flavor to the i-th CPU of its cpuset
// (the node's CPUs 0..nodeCPUs-1 when none is given), round robin when
// there are more vCPUs than CPUs; a shared flavor floats.
func vcpuPins(rc ResourceConfig, nodeCPUs int) ([]libvirtxml.DomainCPUTuneVCPUPin, error) {
	if rc.CPUPolicy != cpuPinned {
		return nil, nil
	}
	var cpus []int
	if rc.CPUSet != "" {
		var err error
		if cpus, err = parseCPUSet(rc.CPUSet); err != nil {
			return nil, err
		}
	} else {
		for c := range max(nodeCPUs, 1) {
			cpus = append(cpus, c)
		}
	}
	if nodeCPUs > 0 && cpus[len(cpus)-1] >= nodeCPUs {
		return nil, fmt.Errorf("cpuset %q names CPU %d and this node has CPUs 0-%d", rc.CPUSet, cpus[len(cpus)-1], nodeCPUs-1)
	}
	n := rc.vcpuCount()
	pins := make([]libvirtxml.DomainCPUTuneVCPUPin, n)
	for i := range pins {
		pins[i] = libvirtxml.DomainCPUTuneVCPUPin{VCPU: uint(i), CPUSet: strconv.Itoa(cpus[i%len(cpus)])}
	}
	return pins, nil
}

// digest is a short stable digest of a resource id.
func digest(id string, n int) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:n]
}

// domainName maps a resource id onto a domain name: ids of letters,
// digits, '_', '.' and '-' stay readable; others are sanitized and get a
// digest of the id, so two ids never share a name.
func domainName(prefix, id string) string {
	clean := id != ""
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i], clean = '_', false
		}
	}
	if clean {
		return prefix + id
	}
	return prefix + string(b) + "-" + digest(id, 8)
}

// tapName is the default host tap of a resource: "uv" and 12 hex digits of
// the id's digest, 14 characters (Linux allows 15).
func tapName(id string) string { return "uv" + digest(id, 12) }

// macAddress is a stable locally administered address from the id (QEMU's
// 52:54:00 prefix), so a VM defined again keeps its MAC.
func macAddress(id string) string {
	h := digest("mac:"+id, 6)
	return "52:54:00:" + h[0:2] + ":" + h[2:4] + ":" + h[4:6]
}

// observed is what the plugin reads of a domain to judge its state.
type observed struct {
	State   string // running, blocked, paused, shutdown, shutoff, crashed, pmsuspended, nostate
	Reason  string // libvirt's reason of that state (shutoff: shutdown, destroyed, crashed, failed, ...)
	Console string // the console's last lines, for a reason
	Panic   string // the console's "Kernel panic - ..." line, "" without one
}

// stateOf maps a domain's state onto the resource's. A domain unyo did
// not stop (Delete undefines it at once) that is shut off has ended by
// itself: a guest that powered off is STOPPED, anything else (a panic, a
// crash, QEMU killed, a failed start) is FAILED with the console's last
// lines.
func stateOf(o observed) (pluginv1.ResourceState, string) {
	withConsole := func(s string) string {
		if o.Panic != "" {
			s = "the guest's kernel panicked (" + o.Panic + "); " + s
		}
		if o.Console != "" {
			s += "; console: " + o.Console
		}
		return s
	}
	switch o.State {
	case "running", "blocked":
		return sdk.Running, ""
	case "paused":
		return sdk.Stopped, "paused (" + o.Reason + ")"
	case "pmsuspended":
		return sdk.Stopped, "suspended by the guest"
	case "shutdown":
		return sdk.Running, "shutting down"
	case "crashed":
		return sdk.Broken, withConsole("the guest crashed")
	case "shutoff":
		switch o.Reason {
		case "shutdown":
			if o.Panic == "" {
				return sdk.Stopped, withConsole("the guest powered off")
			}
		case "failed":
			return sdk.Broken, withConsole("the domain failed to start")
		case "crashed":
			return sdk.Broken, withConsole("the guest crashed")
		}
		return sdk.Broken, withConsole(fmt.Sprintf("the VM stopped (%s)", o.Reason))
	}
	return sdk.Broken, fmt.Sprintf("unknown domain state %q (%s)", o.State, o.Reason)
}

// consoleReason reads a console log's tail for a reason: the kernel's
// panic line, if any, and the last n lines up to it (what the guest
// printed before it died, rather than the register dump after).
func consoleReason(tail string, n int) (console, panicLine string) {
	i := strings.LastIndex(tail, "Kernel panic")
	if i < 0 {
		return lastLines(tail, n), ""
	}
	end := len(tail)
	if j := strings.IndexByte(tail[i:], '\n'); j >= 0 {
		end = i + j
	}
	panicLine = strings.TrimSpace(strings.ReplaceAll(tail[i:end], "\r", ""))
	return lastLines(tail[:end], n), panicLine
}

// lastLines keeps the last n non-empty lines of s, joined by " | " so a
// reason stays one line.
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.ReplaceAll(l, "\r", "")); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, " | ")
}
