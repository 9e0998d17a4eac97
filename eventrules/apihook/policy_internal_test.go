package apihook

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPolicyCheckIP(t *testing.T) {
	tests := []struct {
		name    string
		allow   []string
		ip      string
		named   bool
		wantErr string // "" allowed
	}{
		{"public, default policy", nil, "203.0.113.7", false, ""},
		{"private, default policy", nil, "10.1.2.3", false, ""},
		{"loopback refused", nil, "127.0.0.1", false, "a loopback address is refused unless cluster.api_hook.allow lists it (as 127.0.0.1/32)"},
		{"loopback v6 refused", nil, "::1", false, "a loopback address"},
		{"v4-mapped loopback refused", nil, "::ffff:127.0.0.1", false, "a loopback address"},
		{"metadata refused", nil, "169.254.169.254", false, "the cloud metadata address"},
		{"metadata v6 refused", nil, "fd00:ec2::254", false, "the cloud metadata address"},
		{"link-local refused", nil, "169.254.10.1", false, "a link-local address"},
		{"link-local v6 refused", nil, "fe80::1", false, "a link-local address"},
		{"unspecified refused", nil, "0.0.0.0", false, "the unspecified address"},
		{"multicast refused", nil, "224.0.0.1", false, "a multicast address"},
		{"loopback allowed by address", []string{"127.0.0.1"}, "127.0.0.1", false, ""},
		{"loopback allowed by CIDR", []string{"127.0.0.0/8"}, "127.0.0.2", false, ""},
		{"a named host does not allow loopback", []string{"localhost"}, "127.0.0.1", true, "a loopback address"},
		{"metadata not allowed by a wide CIDR of other addresses", []string{"10.0.0.0/8"}, "169.254.169.254", false, "the cloud metadata address"},
		{"allowlist: listed CIDR", []string{"203.0.113.0/24"}, "203.0.113.7", false, ""},
		{"allowlist: named URL", []string{"hooks.example.com"}, "203.0.113.7", true, ""},
		{"allowlist: unlisted", []string{"hooks.example.com"}, "198.51.100.1", false, "cluster.api_hook.allow lists neither the URL, its host nor this address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			err = p.checkIP(netip.MustParseAddr(tt.ip), tt.named)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkIP(%s) = %v, want allowed", tt.ip, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkIP(%s) = %v, want an error containing %q", tt.ip, err, tt.wantErr)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		entry, wantErr string
	}{
		{"10.0.0.0/8", ""},
		{"127.0.0.1", ""},
		{"::1", ""},
		{"hooks.example.com", ""},
		{"https://hooks.example.com/unyo/", ""},
		{"", "[0]: is empty"},
		{"10.0.0.0/33", "not a valid CIDR"},
		{"ftp://x/", "not an http or https URL prefix"},
		{"https://u:p@hooks.example.com/", "must not carry credentials"},
		{"hooks.example.com:8080", "neither an IP address"},
	}
	for _, tt := range tests {
		_, err := ParsePolicy([]string{tt.entry})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParsePolicy(%q) = %v", tt.entry, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParsePolicy(%q) = %v, want an error containing %q", tt.entry, err, tt.wantErr)
		}
	}
}

func TestPolicyNamed(t *testing.T) {
	p, err := ParsePolicy([]string{"Hooks.Example.com", "https://other.example.com/unyo/"})
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]bool{
		"https://hooks.example.com./x":        true,
		"http://hooks.example.com:8080/x":     true,
		"https://other.example.com/unyo/a":    true,
		"https://other.example.com/elsewhere": false,
		"https://evil.example.com/":           false,
	} {
		u := mustURL(t, raw)
		if got := p.named(u); got != want {
			t.Errorf("named(%s) = %v, want %v", raw, got, want)
		}
	}
}
