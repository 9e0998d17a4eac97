package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk"
	sdklb "github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// TestProbe checks one backend the ways lb.Health allows, against real
// servers on 127.0.0.1.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Error(w, "draining", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	cases := []struct {
		name string
		hc   sdklb.Health
		want string // "" for healthy, else part of the error
	}{
		{"tcp connects", sdklb.Health{Kind: "tcp", Port: port}, ""},
		{"tcp refused", sdklb.Health{Kind: "tcp", Port: closedPort}, "refused"},
		{"http 200", sdklb.Health{Kind: "http", Port: port, Path: "/"}, ""},
		{"http 503", sdklb.Health{Kind: "http", Port: port, Path: "/down"}, "GET http://127.0.0.1:" + strconv.Itoa(port) + "/down answered 503"},
		{"http refused", sdklb.Health{Kind: "http", Port: closedPort, Path: "/"}, "refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.hc.Timeout = sdk.Duration(time.Second)
			err := probe(context.Background(), lo, c.hc)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("probe: %v, want %q", err, c.want)
			}
		})
	}
}
