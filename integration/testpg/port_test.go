package testpg

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// A port taken while the server was down makes Start fail, and the start-up
// path picks another port in that case.
func TestPortTaken(t *testing.T) {
	srv := New(t, WithSetting("application_name", "it's quoted"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	port := srv.Port()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("occupy port %d: %v", port, err)
	}
	defer l.Close()
	if err := srv.Start(ctx); err == nil {
		t.Fatal("server started on a taken port")
	}
	if !portTaken(srv.logTail(4096)) {
		t.Fatalf("log does not say the port was taken:\n%s", srv.logTail(4096))
	}
	if err := srv.startFreePort(ctx); err != nil {
		t.Fatalf("start on a free port: %v", err)
	}
	if srv.Port() == port {
		t.Fatalf("still on the taken port %d", port)
	}
}
