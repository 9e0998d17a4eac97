package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden domain XML files under testdata/")

// TestDomainXML compares the domain of each resource shape with its golden
// file (go test -run TestDomainXML -update rewrites them).
func TestDomainXML(t *testing.T) {
	labels := map[string]string{"unyo.dev/node": "n1", "unyo.dev/compute": "web-1", "unyo.dev/service": "web"}
	kernel := Image{Kernel: "/img/guest/vmlinux", Initrd: "/img/guest/initrd.gz", Cmdline: "quiet"}
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"kernel_address", Spec{RC: ResourceConfig{Image: "guest", Address: "169.254.33.2", VCPUs: 1, MemoryBytes: 256 << 20},
			Image: kernel, TapManaged: true}},
		{"kernel_pinned_cpuset", Spec{RC: ResourceConfig{Image: "guest", VCPUs: 3, MemoryBytes: 512 << 20, CPUPolicy: "pinned", CPUSet: "2-3",
			Address: "169.254.33.9/32", Gateway: "169.254.1.9", Cmdline: "unyo.ready=x"}, Image: kernel, NodeCPUs: 4}},
		{"kernel_pinned_node", Spec{RC: ResourceConfig{Image: "guest", VCPUs: 1.5, CPUPolicy: "pinned"}, Image: kernel, NodeCPUs: 2, TapManaged: true,
			DomainType: "kvm"}},
		{"disk_overlay", Spec{RC: ResourceConfig{Image: "debian.qcow2", VCPUs: 2, MemoryBytes: 1 << 30, DiskBytes: 10 << 30, Tap: "tap-web1"},
			Image: Image{Disk: "/img/debian.qcow2", DiskFormat: "qcow2"}, Layout: Layout{Overlay: "/state/unyo-web-1/disk.qcow2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.ID, s.Name, s.Labels = "web-1", "unyo-web-1", labels
			if s.DomainType == "" {
				s.DomainType = "qemu"
			}
			s.Config = map[string]any{"image": s.RC.Image}
			if s.Layout.Console == "" {
				s.Layout.Dir, s.Layout.Console = "/state/unyo-web-1", "/state/unyo-web-1/console.log"
			}
			s.Tap = s.RC.Tap
			if s.Tap == "" {
				s.Tap = tapName(s.ID)
			}
			got, err := domainXML(s)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".xml")
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestDomainXML -update writes it)", err)
			}
			if got+"\n" != string(want) {
				t.Errorf("domain XML differs from %s:\n%s", golden, got)
			}
			// The metadata reads back.
			var d libvirtxml.Domain
			if err := d.Unmarshal(got); err != nil {
				t.Fatal(err)
			}
			id, l, cfg, ok := decodeMeta(&d)
			if !ok || id != "web-1" || !reflect.DeepEqual(l, labels) || cfg["image"] != s.RC.Image {
				t.Errorf("decodeMeta = %q %v %v %v", id, l, cfg, ok)
			}
		})
	}
}

func TestDomainXMLBadCPUSet(t *testing.T) {
	_, err := domainXML(Spec{ID: "x", Name: "x", DomainType: "qemu", RC: ResourceConfig{CPUPolicy: "pinned", CPUSet: "6"}, NodeCPUs: 2,
		Layout: Layout{Console: "/c"}})
	if err == nil || !strings.Contains(err.Error(), "CPU 6") {
		t.Fatalf("pinning to a CPU the node lacks: %v", err)
	}
}

func TestDecodeMetaForeign(t *testing.T) {
	for _, md := range []string{"", `<other:x xmlns:other="https://example.org/x"/>`, `<resource xmlns="https://unyo.dev/xmlns/provider-libvirt/1"><id></id></resource>`} {
		d := &libvirtxml.Domain{Metadata: &libvirtxml.DomainMetadata{XML: md}}
		if _, _, _, ok := decodeMeta(d); ok {
			t.Errorf("metadata %q read as unyo's", md)
		}
	}
	// Beside another application's element, with a prefix of libvirt's.
	d := &libvirtxml.Domain{Metadata: &libvirtxml.DomainMetadata{XML: `<other:x xmlns:other="https://example.org/x"/>` +
		`<unyo:resource xmlns:unyo="https://unyo.dev/xmlns/provider-libvirt/1"><unyo:id>a</unyo:id><unyo:label key="k" value="v"/><unyo:config>{"image":"i"}</unyo:config></unyo:resource>`}}
	if id, l, cfg, ok := decodeMeta(d); !ok || id != "a" || l["k"] != "v" || cfg["image"] != "i" {
		t.Errorf("decodeMeta = %q %v %v %v", id, l, cfg, ok)
	}
}

func TestParseResource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    map[string]any
		field string // "" = valid
	}{
		{"minimal", map[string]any{"image": "guest"}, ""},
		{"full", map[string]any{"image": "/x/d.qcow2", "address": "169.254.33.2", "gateway": "169.254.1.1", "cmdline": "a=b", "vcpus": 2.0,
			"memory_bytes": float64(1 << 30), "disk_bytes": float64(1 << 30), "cpu_policy": "pinned", "cpuset": "0-1", "tap": "tap0"}, ""},
		{"no image", map[string]any{"vcpus": 1.0}, "image"},
		{"escaping image", map[string]any{"image": "../etc/passwd"}, "image"},
		{"negative cpus", map[string]any{"image": "g", "vcpus": -1.0}, "vcpus"},
		{"tiny memory", map[string]any{"image": "g", "memory_bytes": float64(1 << 20)}, "memory_bytes"},
		{"negative disk", map[string]any{"image": "g", "disk_bytes": -1.0}, "disk_bytes"},
		{"bad policy", map[string]any{"image": "g", "cpu_policy": "dedicated"}, "cpu_policy"},
		{"bad cpuset", map[string]any{"image": "g", "cpuset": "a-b"}, "cpuset"},
		{"long tap", map[string]any{"image": "g", "tap": "a-very-long-tap-name"}, "tap"},
		{"bad address", map[string]any{"image": "g", "address": "nowhere"}, "address"},
		{"bad gateway", map[string]any{"image": "g", "gateway": "1.2.3"}, "gateway"},
		{"unknown field", map[string]any{"image": "g", "colour": "red"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseResource(tc.in)
			if tc.name == "unknown field" {
				if err == nil {
					t.Fatal("an unknown field was accepted")
				}
				return
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("parseResource: %v", err)
				}
				return
			}
			ce, ok := err.(*sdk.ConfigError)
			if !ok || len(ce.Violations) == 0 || ce.Violations[0].Field != tc.field {
				t.Fatalf("parseResource: %v, want a problem with %s", err, tc.field)
			}
		})
	}
}

func TestParseCPUSet(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0-3": {0, 1, 2, 3}, "0-3,^1": {0, 2, 3}, "5,1-2": {1, 2, 5}} {
		got, err := parseCPUSet(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseCPUSet(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "3-1", "-1", "0,^0"} {
		if _, err := parseCPUSet(bad); err == nil {
			t.Errorf("parseCPUSet(%q) accepted", bad)
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"web-1", "unyo-web-1"},
		{"conf-ab12-lifecycle-a", "unyo-conf-ab12-lifecycle-a"},
		{"web/1", "unyo-web_1-"},
	} {
		got := domainName("unyo-", tc.id)
		if !strings.HasPrefix(got, tc.want) || (strings.HasSuffix(tc.want, "-") && len(got) != len(tc.want)+8) {
			t.Errorf("domainName(%q) = %q, want %q(+digest)", tc.id, got, tc.want)
		}
	}
	if domainName("u-", "a/b") == domainName("u-", "a_b") {
		t.Error("ids a/b and a_b share a domain name")
	}
	for _, id := range []string{"web-1", "a-very-long-compute-name-of-a-service-7", ""} {
		if tap := tapName(id); len(tap) > 15 || !validIfname(tap) {
			t.Errorf("tapName(%q) = %q is no device name", id, tap)
		}
	}
	if tapName("a") == tapName("b") || macAddress("a") == macAddress("b") || macAddress("a") != macAddress("a") {
		t.Error("taps or MACs of two ids collide, or a MAC is not stable")
	}
}

func TestStateOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      observed
		state  pluginv1.ResourceState
		reason []string
	}{
		{"running", observed{State: "running"}, sdk.Running, nil},
		{"blocked", observed{State: "blocked"}, sdk.Running, nil},
		{"paused", observed{State: "paused", Reason: "1"}, sdk.Stopped, []string{"paused"}},
		{"powered off", observed{State: "shutoff", Reason: "shutdown", Console: "bye"}, sdk.Stopped, []string{"powered off", "console: bye"}},
		{"panic", observed{State: "shutoff", Reason: "shutdown", Panic: "Kernel panic - not syncing: Attempted to kill init!", Console: "init exits"},
			sdk.Broken, []string{"kernel panicked (Kernel panic - not syncing: Attempted to kill init!)", "console: init exits"}},
		{"destroyed", observed{State: "shutoff", Reason: "destroyed"}, sdk.Broken, []string{"stopped (destroyed)"}},
		{"crashed", observed{State: "crashed"}, sdk.Broken, []string{"crashed"}},
		{"failed", observed{State: "shutoff", Reason: "failed", Console: "x"}, sdk.Broken, []string{"failed to start", "console: x"}},
		{"unknown", observed{State: "weird"}, sdk.Broken, []string{"unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, reason := stateOf(tc.o)
			if st != tc.state {
				t.Errorf("state %v (%s), want %v", st, reason, tc.state)
			}
			for _, w := range tc.reason {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q lacks %q", reason, w)
				}
			}
		})
	}
}

func TestKernelCmdline(t *testing.T) {
	got := kernelCmdline(ResourceConfig{Address: "169.254.33.2", Cmdline: "x=1"}, Image{Cmdline: "init=/sbin/init"})
	want := "console=ttyS0 quiet panic=-1 init=/sbin/init unyo.ip=169.254.33.2/32 unyo.gw=169.254.1.1 x=1"
	if got != want {
		t.Errorf("kernelCmdline = %q, want %q", got, want)
	}
}

func TestFits(t *testing.T) {
	for _, tc := range []struct {
		rc   ResourceConfig
		want string
	}{
		{ResourceConfig{VCPUs: 2, MemoryBytes: 1 << 30}, ""},
		{ResourceConfig{}, ""},
		{ResourceConfig{VCPUs: 2.5}, "3 vCPUs and this node has 2"},
		{ResourceConfig{MemoryBytes: 8 << 30}, "8192 MiB of memory and this node has 4096 MiB"},
	} {
		if got := fits(tc.rc, 2, 4<<30); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("fits(%+v) = %q, want %q", tc.rc, got, tc.want)
		}
	}
}

func TestConsoleReason(t *testing.T) {
	tail := "boot\nUNYO-GUEST: this init exits\r\n[ 4.9] Kernel panic - not syncing: Attempted to kill init!\r\n[ 4.9] RAX: 0\n[ 4.9] Kernel Offset: disabled\n"
	console, panicLine := consoleReason(tail, 2)
	if console != "UNYO-GUEST: this init exits | [ 4.9] Kernel panic - not syncing: Attempted to kill init!" ||
		panicLine != "Kernel panic - not syncing: Attempted to kill init!" {
		t.Errorf("consoleReason = %q, %q", console, panicLine)
	}
	if console, panicLine := consoleReason("a\nb\n", 5); console != "a | b" || panicLine != "" {
		t.Errorf("consoleReason without a panic = %q, %q", console, panicLine)
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\r\n\nb\nc\nd\n", 2); got != "c | d" {
		t.Errorf("lastLines = %q", got)
	}
}

// TestWholeGiB: the free disk a fingerprint reports moves only by whole
// GiB, so writes elsewhere on the filesystem do not change it every
// heartbeat.
func TestWholeGiB(t *testing.T) {
	for _, tc := range []struct{ in, want int64 }{
		{0, 0}, {1<<30 - 1, 0}, {1 << 30, 1 << 30}, {18547294208, 17 << 30}, {18538541056, 17 << 30},
	} {
		if got := wholeGiB(tc.in); got != tc.want {
			t.Errorf("wholeGiB(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
