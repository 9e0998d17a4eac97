package metadata

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// get asks srv from the local address from.
func get(t *testing.T, url, from string) (int, []byte) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestSourceAddressIsTheIdentity(t *testing.T) {
	info := Info{Compute: "web-0", Service: "web", Node: "n1", Addresses: []string{"10.1.0.5"}, ClusterURL: "http://169.254.1.2/v1/proxy"}
	proxied := false
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied = true })
	// 127.0.0.2 stands in for the compute's address: every 127/8 address
	// is on lo.
	srv := httptest.NewServer(New(info, []netip.Addr{netip.MustParseAddr("127.0.0.2")}, proxy))
	defer srv.Close()

	for _, tc := range []struct {
		name, from, path string
		want             int
	}{
		{"the compute", "127.0.0.2", "/v1/metadata", http.StatusOK},
		{"another address", "127.0.0.3", "/v1/metadata", http.StatusForbidden},
		{"another address to the proxy", "127.0.0.3", "/v1/proxy/x", http.StatusForbidden},
		{"the compute to the proxy", "127.0.0.2", "/v1/proxy/x", http.StatusOK},
		{"an unknown path", "127.0.0.2", "/v1/other", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxied = false
			code, body := get(t, srv.URL+tc.path, tc.from)
			if code != tc.want {
				t.Fatalf("status %d (%s), want %d", code, body, tc.want)
			}
			if tc.path == "/v1/metadata" && code == http.StatusOK {
				var got Info
				if err := json.Unmarshal(body, &got); err != nil || got.Compute != "web-0" || got.Addresses[0] != "10.1.0.5" || got.ClusterURL == "" {
					t.Fatalf("metadata %s (%v)", body, err)
				}
			}
			if want := tc.path == "/v1/proxy/x" && tc.want == http.StatusOK; proxied != want {
				t.Errorf("proxied = %v, want %v", proxied, want)
			}
		})
	}
}
