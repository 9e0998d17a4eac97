package main

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/conformance"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/xdptest"
)

// pinDir makes a pin directory whose bpffs (the plugin mounts one) is
// unmounted when the test ends, whatever the plugin left.
func pinDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "bpf")
	t.Cleanup(func() {
		for range 3 {
			if unix.Unmount(dir, unix.MNT_DETACH) != nil {
				break
			}
		}
	})
	return dir
}

// xdpAttached says whether an XDP program sits on dev in ns.
func xdpAttached(t *testing.T, ns *xdptest.NS, dev string) bool {
	t.Helper()
	var on bool
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		on = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return on
}

// checkClean fails the test when the plugin left a mount or a program.
func checkClean(t *testing.T, ns *xdptest.NS, dev, pins string) {
	t.Helper()
	if left := xdptest.Leftovers(nil, []string{pins}); len(left) > 0 {
		t.Errorf("left behind after every load balancer was deleted: %v", left)
	}
	if xdpAttached(t, ns, dev) {
		t.Errorf("an XDP program is still attached to %s after every load balancer was deleted", dev)
	}
}

func TestConformance(t *testing.T) {
	xdptest.NeedRoot(t)
	sfx := xdptest.Suffix()
	ns, peer := xdptest.NewNS(t, "uxf-"+sfx), xdptest.NewNS(t, "uxg-"+sfx)
	xdptest.Veth(t, ns, "uxf0", netip.MustParsePrefix("10.98.0.1/24"), peer, "uxf1", netip.MustParsePrefix("10.98.0.2/24"))
	fx, err := conformance.LoadFixtures("testdata/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pins := pinDir(t)
	fx.Config["netns"] = ns.Path
	fx.Config["pin_dir"] = pins
	fx.Config["state_dir"] = filepath.Join(t.TempDir(), "state")
	conformance.Run(t, conformance.Binary(conformance.Build(t, ".", "unyo-provider-xdp"), fx))
	checkClean(t, ns, "uxf0", pins)
}

// proc is the plugin running as a process of its own, so that a test can
// SIGKILL it.
type proc struct {
	conn   *base.Conn
	pid    int
	client *plugin.Client
}

func startPlugin(t *testing.T, bin string, cfg map[string]any) *proc {
	t.Helper()
	dir, err := os.MkdirTemp("", "uxp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cmd := newCmd(bin, dir)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: base.Handshake(), Plugins: base.ClientPluginSet(), Cmd: cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC}, Logger: hclog.NewNullLogger(), StartTimeout: 10 * time.Second,
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		t.Fatalf("starting %s: %v", bin, err)
	}
	raw, err := rpc.Dispense(base.NamePlugin)
	if err != nil {
		client.Kill()
		t.Fatal(err)
	}
	p := &proc{conn: raw.(*base.Conn), client: client}
	if rc := client.ReattachConfig(); rc != nil {
		p.pid = rc.Pid
	}
	t.Cleanup(client.Kill)
	s, err := structpb.NewStruct(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.conn.Plugin.Configure(context.Background(), &pluginv1.ConfigureRequest{Config: s, ApiVersion: base.APIVersion1}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return p
}

// kill ends the plugin with SIGKILL: no chance to clean up.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 500 {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat"); err != nil || strings.Contains(string(b), ") Z ") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.client.Kill()
}
