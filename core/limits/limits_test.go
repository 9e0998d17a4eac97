package limits

import (
	"strings"
	"testing"
	"time"
)

func TestAddress(t *testing.T) {
	tests := []struct {
		addr, want string // want "" accepted
	}{
		{"", ""},
		{"10.0.0.5:7070", ""},
		{"web-1.example.com:7070", ""},
		{"[::1]:7070", ""},
		{"[::]:7070", ""},
		{"10.0.0.5:7070\r\nHost: evil", `holds '\r'`},
		{"10.0.0.5:7070\n", `holds '\n'`},
		{"10.0.0.5 :7070", `holds ' '`},
		{"10.0.0.5:7070\x00", `holds '\x00'`},
		{"http://10.0.0.5:7070", `holds '/'`},
		{"user@10.0.0.5:7070", `holds '@'`},
		{"10.0.0.5", "is not host:port"},
		{"10.0.0.5:http", "port \"http\" is not a number"},
		{"10.0.0.5:0", "port \"0\" is not a number from 1 to 65535"},
		{"[fe80::1%eth0]:7070", "zone identifiers"},
		{strings.Repeat("a", 600) + ":1", "602 bytes, at most 512"},
	}
	for _, tt := range tests {
		err := Address("node.address", tt.addr)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.addr, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "node.address: ")):
			t.Errorf("%q: got %v, want node.address: ...%s", tt.addr, err, tt.want)
		}
	}
}

func TestTruncateAndAbbrev(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	if got, cut := Truncate(s, 5); got != "éé" || !cut {
		t.Errorf("Truncate = %q %v, want two characters, cut", got, cut)
	}
	if got, cut := Truncate(s, 20); got != s || cut {
		t.Errorf("Truncate at the length cut something")
	}
	if a := Abbrev(strings.Repeat("é", 100)); len(a) > 64+len("…") || !strings.HasSuffix(a, "…") {
		t.Errorf("Abbrev = %q", a)
	}
}

func TestResultTime(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		at   time.Time
		want string
	}{
		{now, ""},
		{now.Add(-MaxResultAge + time.Minute), ""},
		{now.Add(MaxResultSkew - time.Second), ""},
		{now.Add(-MaxResultAge - time.Minute), "started_at: 2026-10-26T11:59:00Z is more than 30 days before the cluster's clock (2026-11-25T12:00:00Z)"},
		{now.Add(MaxResultSkew + time.Second), "started_at: 2026-11-25T12:10:01Z is more than 10m0s after the cluster's clock"},
	}
	for _, tt := range tests {
		err := ResultTime("started_at", tt.at, now)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v, want %q", tt.at, err, tt.want)
		}
	}
}

func TestLimit(t *testing.T) {
	for _, tt := range []struct {
		n    int32
		want string
	}{{0, ""}, {1, ""}, {MaxListLimit, ""}, {MaxListLimit + 1, "limit: 10001 is more than the maximum of 10000"}, {-1, "limit: -1 is negative"}} {
		err := ListLimit("limit", tt.n)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%d: got %v, want %q", tt.n, err, tt.want)
		}
	}
}
