package testbin

import (
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// Serve runs p in-process, configures it with config and returns clients;
// everything is stopped when the test ends.
func Serve(t testing.TB, p sdk.Plugin, config map[string]any) *base.Conn {
	t.Helper()
	dir, err := os.MkdirTemp("", "ut") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	ip, err := sdk.ServeInProcess(p, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("unix://"+ip.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		ip.Stop(time.Second)
		os.RemoveAll(dir)
	})
	c := base.NewConn(cc, ip.Exited())
	cfg, err := structpb.NewStruct(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Plugin.Configure(context.Background(), &pluginv1.ConfigureRequest{Config: cfg, ApiVersion: base.APIVersion1}); err != nil {
		t.Fatal(err)
	}
	return c
}

// Struct converts a map for a request, failing the test on bad values.
func Struct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
