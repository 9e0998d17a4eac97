package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// A resource with netns runs its command in that network namespace (the
// agent's port namespace).
func TestRunsInTheNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces need root")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	path := makeNetns(t, "unyo-test-exec-"+hex.EncodeToString(b))
	var want syscall.Stat_t
	if err := syscall.Stat(path, &want); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	c := serve(t, state)
	_, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: "p", Config: testbin.Struct(t, map[string]any{
		"command": []any{"sh", "-c", "readlink /proc/self/ns/net; sleep 30"}, "netns": path})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: "p", Grace: durationpb.New(time.Second)})
	})
	wantLine := fmt.Sprintf("net:[%d]", want.Ino)
	testutil.Eventually(t, 5*time.Second, "the command runs in the namespace", func() error {
		out, _ := os.ReadFile(filepath.Join(state, "p", "stdout.log"))
		if strings.TrimSpace(string(out)) != wantLine {
			return fmt.Errorf("the command's namespace is %q, want %q", out, wantLine)
		}
		return nil
	})
}

// makeNetns creates a named network namespace (as `ip netns add` does),
// removed at the test's end.
func makeNetns(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join("/run/netns", name)
	if err := os.MkdirAll("/run/netns", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() {
		_ = unix.Unmount(path, unix.MNT_DETACH)
		_ = os.Remove(path)
	})
	errc := make(chan error, 1)
	// A throwaway thread: unshare, bind its namespace to path, exit
	// locked so the runtime retires it.
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return path
}
