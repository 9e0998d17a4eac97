package cluster

import (
	"strings"
	"testing"
)

func TestProbeAddress(t *testing.T) {
	for _, tc := range []struct {
		addr, from, want, err string
	}{
		{addr: "", from: "10.0.0.5:4000", want: ""},
		{addr: "10.0.0.5:7402", from: "10.0.0.5:4000", want: "10.0.0.5:7402"},
		{addr: "10.0.0.9:7402", from: "10.0.0.5:4000", want: "10.0.0.9:7402"},
		{addr: "[2001:db8::1]:7402", from: "10.0.0.5:4000", want: "[2001:db8::1]:7402"},
		// The cluster's own loopback, the metadata service and "every
		// address" become the node's own address.
		{addr: "127.0.0.1:7402", from: "10.0.0.5:4000", want: "10.0.0.5:7402"},
		{addr: "169.254.169.254:80", from: "10.0.0.5:4000", want: "10.0.0.5:80"},
		{addr: "[fe80::1]:80", from: "10.0.0.5:4000", want: "10.0.0.5:80"},
		{addr: "0.0.0.0:7402", from: "[2001:db8::7]:4000", want: "[2001:db8::7]:7402"},
		{addr: "[::]:7402", from: "10.0.0.5:4000", want: "10.0.0.5:7402"},
		{addr: "[::ffff:127.0.0.1]:7402", from: "10.0.0.5:4000", want: "10.0.0.5:7402"},
		{addr: "127.0.0.1:7402", from: "127.0.0.1:4000", want: "127.0.0.1:7402"},
		{addr: "127.0.0.1:7402", from: "", err: "unknown"},
		{addr: "metadata.google.internal:80", from: "10.0.0.5:4000", err: "IP address"},
		{addr: "10.0.0.5", from: "10.0.0.5:4000", err: "host:port"},
		{addr: "10.0.0.5:80\r\nHost: x", from: "10.0.0.5:4000", err: "port"},
		{addr: "10.0.0.5:0", from: "10.0.0.5:4000", err: "port"},
		{addr: "10.0.0.5:080", from: "10.0.0.5:4000", err: "port"},
		{addr: "10.0.0.5:http", from: "10.0.0.5:4000", err: "port"},
		{addr: "[fe80::1%eth0]:80", from: "10.0.0.5:4000", err: "IP address"},
	} {
		got, err := probeAddress(tc.addr, tc.from)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("probeAddress(%q, %q) = %q, %v; want an error naming %q", tc.addr, tc.from, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("probeAddress(%q, %q) = %q, %v; want %q", tc.addr, tc.from, got, err, tc.want)
		}
	}
}
