package lb

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

func TestObserve(t *testing.T) {
	h := Health{Fall: 2, Rise: 3}
	fail := errors.New("connect: connection refused")
	tests := []struct {
		name    string
		start   BackendState
		results []error
		healthy []bool // after each result
		changed []bool
	}{
		{"unchecked: the first success decides", BackendState{}, []error{nil}, []bool{true}, []bool{true}},
		{"unchecked: the first failure decides, rise brings it back", BackendState{},
			[]error{fail, nil, nil, nil}, []bool{false, false, false, true}, []bool{true, false, false, true}},
		{"healthy from the start: fall failures in a row", BackendState{Healthy: true, Checked: true},
			[]error{fail, nil, fail, fail}, []bool{true, true, true, false}, []bool{false, false, false, true}},
		{"a failure resets the rise", BackendState{Checked: true, Reason: "connect: timeout"},
			[]error{nil, nil, fail, nil, nil, nil}, []bool{false, false, false, false, false, true}, []bool{false, false, false, false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.start
			at := time.Unix(100, 0)
			for i, err := range tt.results {
				at = at.Add(time.Second)
				ch := s.Observe(err, h, at)
				if ch != tt.changed[i] || s.Healthy != tt.healthy[i] {
					t.Fatalf("after result %d (%v): healthy %v changed %v, want %v %v", i, err, s.Healthy, ch, tt.healthy[i], tt.changed[i])
				}
				if ch && !s.Since.Equal(at) {
					t.Errorf("since %v, want %v", s.Since, at)
				}
				if s.Healthy != (s.Reason == "") {
					t.Errorf("healthy %v with reason %q", s.Healthy, s.Reason)
				}
			}
		})
	}
}

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
	tests := []struct {
		name string
		h    Health
		want string // "" for healthy, else part of the error
	}{
		{"tcp connects", Health{Kind: "tcp", Port: port}, ""},
		{"tcp refused", Health{Kind: "tcp", Port: closedPort}, "connect 127.0.0.1:" + strconv.Itoa(closedPort) + ": connect: connection refused"},
		{"http 200", Health{Kind: "http", Port: port, Path: "/"}, ""},
		{"http 503", Health{Kind: "http", Port: port, Path: "/down"}, "GET http://127.0.0.1:" + strconv.Itoa(port) + "/down: 503"},
		{"http refused", Health{Kind: "http", Port: closedPort, Path: "/"}, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.h.Timeout = sdk.Duration(time.Second)
			err := Probe(context.Background(), nil, tt.h, lo)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Probe: %v, want %q", err, tt.want)
			}
		})
	}
}
