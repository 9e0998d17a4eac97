// Package nsutil runs code inside a network namespace given by its path
// (/run/netns/NAME, /proc/PID/ns/net): a goroutine locked to an OS thread
// switches the thread into the namespace, runs the code and switches back.
// Sockets keep the namespace they were made in, so a connection dialled or
// a listener opened this way can be used from any goroutine afterwards.
package nsutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn inside the network namespace at path; "" runs it in the
// caller's own namespace.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("reading this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// The thread stays locked and ends with this goroutine,
			// so no other goroutine runs in the wrong namespace.
			errc <- fmt.Errorf("leaving network namespace %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// In runs fn inside the namespace at path and returns its result.
func In[T any](path string, fn func() (T, error)) (T, error) {
	var v T
	err := Do(path, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v, err
}

// Dialer returns a DialContext that makes its sockets in the namespace at
// path.
func Dialer(path string, d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return In(path, func() (net.Conn, error) { return d.DialContext(ctx, network, addr) })
	}
}

// Listen opens a listener in the namespace at path.
func Listen(path, network, addr string) (net.Listener, error) {
	return In(path, func() (net.Listener, error) { return net.Listen(network, addr) })
}

// ListenPacket opens a packet socket in the namespace at path.
func ListenPacket(path, network, addr string) (net.PacketConn, error) {
	return In(path, func() (net.PacketConn, error) { return net.ListenPacket(network, addr) })
}

// Sysctl writes a sysctl (a dotted name, "net.ipv4.ip_forward") inside the
// namespace at path: /proc/sys/net belongs to the namespace of the thread
// that opens it.
func Sysctl(path, name, value string) error {
	return Do(path, func() error {
		f := filepath.Join("/proc/sys", filepath.FromSlash(dotsToSlashes(name)))
		if err := os.WriteFile(f, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", name, value, err)
		}
		return nil
	})
}

func dotsToSlashes(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '.' {
			b[i] = '/'
		}
	}
	return string(b)
}
