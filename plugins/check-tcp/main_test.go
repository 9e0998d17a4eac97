package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// server answers "hello" to "ping" after delay.
func server(t *testing.T, delay time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4)
				_, _ = c.Read(buf)
				time.Sleep(delay)
				_, _ = c.Write([]byte("hello\n"))
			}()
		}
	}()
	return l.Addr().String()
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestTCPCheck(t *testing.T) {
	c := testbin.Serve(t, tcpCheck{}, nil)
	fast, slow := server(t, 0), server(t, 150*time.Millisecond)
	for name, tc := range map[string]struct {
		target map[string]any
		want   pluginv1.CheckStatus
	}{
		"ok":       {map[string]any{"address": fast, "send": "ping", "expect": "hello"}, sdk.OK},
		"warning":  {map[string]any{"address": slow, "send": "ping", "expect": "hello", "warning": "100ms", "critical": "5s"}, sdk.Warning},
		"critical": {map[string]any{"address": slow, "send": "ping", "expect": "hello", "critical": 0.1}, sdk.Critical},
		"refused":  {map[string]any{"address": closedPort(t)}, sdk.Critical},
		"mismatch": {map[string]any{"address": fast, "send": "ping", "expect": "bye"}, sdk.Critical},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := c.Check.Run(context.Background(), &pluginv1.RunRequest{Target: testbin.Struct(t, tc.target), Timeout: durationpb.New(5 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			if r.Result.Status != tc.want {
				t.Errorf("status %v, want %v: %s", r.Result.Status, tc.want, r.Result.Output)
			}
		})
	}
	_, err := c.Check.Run(context.Background(), &pluginv1.RunRequest{Target: testbin.Struct(t, map[string]any{"address": "nope"})})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad address: %v", err)
	}
	r, err := c.Check.Run(context.Background(), &pluginv1.RunRequest{Target: testbin.Struct(t, map[string]any{"address": slow, "send": "ping", "expect": "hello"}), Timeout: durationpb.New(50 * time.Millisecond)})
	if err != nil || !r.Result.TimedOut || r.Result.Status != sdk.Unknown {
		t.Errorf("timeout: %v %v", r, err)
	}
}
