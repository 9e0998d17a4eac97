package agent

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/unyo-ops/unyo/core/agent/portnet"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestPortEnsureOneAtATime: the assignment runner's Create and the port
// loop's attach ensure a port side by side; through the runner they never
// collide half way ("file exists"), and the port is made once.
func TestPortEnsureOneAtATime(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces need root")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	hostName := "unyo-pt-" + hex.EncodeToString(b)
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	host, err := netns.NewNamed(hostName)
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr)
	}
	runtime.UnlockOSThread()
	orig.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); _ = netns.DeleteNamed(hostName) })
	m, err := portnet.New("node-"+hex.EncodeToString(b), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := m.Prune(nil); err != nil {
			t.Error(err)
		}
		m.Close()
	})
	p := &portRunner{m: m}
	port := portnet.Port{Compute: "vm-0", Link: netip.MustParseAddr("169.254.32.7"), Address: netip.MustParseAddr("10.9.0.2")}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.ensure(port)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("ensure side by side: %v", err)
		}
	}
	if left, err := m.List(); err != nil || len(left) != 1 {
		t.Errorf("port namespaces %v (%v), want the one", left, err)
	}
}
