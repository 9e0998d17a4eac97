package ipam

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func addr(t *testing.T, s string) Addr {
	t.Helper()
	a, err := ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAddrRoundTrip(t *testing.T) {
	for _, s := range []string{"0.0.0.0", "10.0.0.1", "192.168.255.255", "255.255.255.255"} {
		if got := addr(t, s).String(); got != s {
			t.Errorf("%s -> %s", s, got)
		}
	}
	if a := addr(t, "10.0.1.0"); a != 10<<24|1<<8 {
		t.Errorf("10.0.1.0 = %d", a)
	}
	for _, bad := range []string{"", "10.0.0", "::1", "10.0.0.256"} {
		if _, err := ParseAddr(bad); err == nil {
			t.Errorf("ParseAddr(%q) succeeded", bad)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"10.0.0.0/24", ""},
		{"0.0.0.0/0", ""},
		{"10.0.0.1/32", ""},
		{"10.0.0.0/33", "prefix length is 0 to 32, not 33"},
		{"fd00::/64", "IPv6"},
		{"10.0.0.1/24", "host bits set; the network is 10.0.0.0/24"},
		{"10.0.0.0", "not in CIDR notation"},
		{"x/24", "not an IPv4 network"},
	} {
		_, err := ParsePrefix(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
}

func rangesOf(p Pool) []string {
	var out []string
	for _, r := range p.Ranges() {
		out = append(out, r.String())
	}
	return out
}

func TestNewPool(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *unyov1.NetworkSpec
		want []string
		size int64
	}{
		{"whole /29 less network, broadcast, gateway",
			&unyov1.NetworkSpec{Cidr: "10.0.0.0/29", Gateway: "10.0.0.1"},
			[]string{"10.0.0.2-10.0.0.6"}, 5},
		{"ranges less reserved and gateway",
			&unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Gateway: "10.0.0.1",
				Ranges:   []*unyov1.AddressRange{{First: "10.0.0.1", Last: "10.0.0.20"}, {First: "10.0.0.100", Last: "10.0.0.255"}},
				Reserved: []string{"10.0.0.5", "10.0.0.128/30"}},
			[]string{"10.0.0.2-10.0.0.4", "10.0.0.6-10.0.0.20", "10.0.0.100-10.0.0.127", "10.0.0.132-10.0.0.254"}, 3 + 15 + 28 + 123},
		{"adjacent ranges merge",
			&unyov1.NetworkSpec{Cidr: "10.0.0.0/24",
				Ranges: []*unyov1.AddressRange{{First: "10.0.0.10", Last: "10.0.0.19"}, {First: "10.0.0.20", Last: "10.0.0.29"}}},
			[]string{"10.0.0.10-10.0.0.29"}, 20},
		{"/31 keeps both addresses", &unyov1.NetworkSpec{Cidr: "10.0.0.0/31"}, []string{"10.0.0.0-10.0.0.1"}, 2},
		{"/32", &unyov1.NetworkSpec{Cidr: "10.0.0.7/32"}, []string{"10.0.0.7"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPool(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := rangesOf(p); !slices.Equal(got, tc.want) {
				t.Errorf("ranges %v, want %v", got, tc.want)
			}
			if p.Size() != tc.size {
				t.Errorf("size %d, want %d", p.Size(), tc.size)
			}
		})
	}
}

func TestNodeLocal(t *testing.T) {
	p, err := PoolOf(NodeLocalName("node-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size() != 8192 || !p.Contains(addr(t, "169.254.32.0")) || !p.Contains(addr(t, "169.254.63.255")) || p.Contains(addr(t, "169.254.64.0")) {
		t.Errorf("node-local pool %v (size %d)", rangesOf(p), p.Size())
	}
	if node, ok := NodeLocal("node-local/node-1"); !ok || node != "node-1" {
		t.Errorf("NodeLocal = %q, %v", node, ok)
	}
	for _, n := range []string{"node-local/", "net-a", "node-local"} {
		if _, ok := NodeLocal(n); ok {
			t.Errorf("%q is node-local", n)
		}
	}
}

func TestFrom(t *testing.T) {
	p, _ := NewPool(&unyov1.NetworkSpec{Cidr: "10.0.0.0/24",
		Ranges: []*unyov1.AddressRange{{First: "10.0.0.10", Last: "10.0.0.19"}, {First: "10.0.0.30", Last: "10.0.0.39"}}})
	var got []string
	for _, r := range p.From(addr(t, "10.0.0.15")) {
		got = append(got, r.String())
	}
	want := []string{"10.0.0.15-10.0.0.19", "10.0.0.30-10.0.0.39", "10.0.0.10-10.0.0.14"}
	if !slices.Equal(got, want) {
		t.Errorf("From = %v, want %v", got, want)
	}
}

// book is an in-memory allocation table: address -> release and reuse
// times (zero while held), as the store keeps them.
type book map[Addr][2]time.Time

func (b book) taken(now time.Time, reads *int) Taken {
	return func(r Range, limit int) ([]Addr, error) {
		*reads++
		var out []Addr
		for a, t := range b {
			if r.Contains(a) && Held(t[0], t[1], now) {
				out = append(out, a)
			}
		}
		slices.Sort(out)
		if len(out) > limit {
			out = out[:limit]
		}
		return out, nil
	}
}

func TestNextAllocatesOnwardsAndWraps(t *testing.T) {
	p, _ := NewPool(&unyov1.NetworkSpec{Cidr: "10.0.0.0/29", Gateway: "10.0.0.1"}) // .2-.6
	b := book{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var reads int
	cursor := Addr(0)
	var got []string
	for range 5 {
		a, err := p.Next(cursor, b.taken(now, &reads))
		if err != nil {
			t.Fatal(err)
		}
		b[a] = [2]time.Time{}
		cursor = a + 1
		got = append(got, a.String())
	}
	if want := []string{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}; !slices.Equal(got, want) {
		t.Fatalf("allocated %v, want %v", got, want)
	}
	if _, err := p.Next(cursor, b.taken(now, &reads)); !errors.Is(err, ErrFull) {
		t.Fatalf("a full pool: %v, want ErrFull", err)
	}

	// .3 released with a one-hour quarantine: not handed out before it ends.
	quarantine := time.Hour
	b[addr(t, "10.0.0.3")] = [2]time.Time{now, now.Add(quarantine)}
	if _, err := p.Next(cursor, b.taken(now.Add(59*time.Minute), &reads)); !errors.Is(err, ErrFull) {
		t.Fatalf("during quarantine: %v, want ErrFull", err)
	}
	a, err := p.Next(cursor, b.taken(now.Add(quarantine), &reads))
	if err != nil || a.String() != "10.0.0.3" {
		t.Fatalf("after quarantine: %v, %v; want 10.0.0.3", a, err)
	}
}

func TestNextPagesOverLongTakenRuns(t *testing.T) {
	p, _ := PoolOf(NodeLocalName("n"), nil)
	b := book{}
	first := addr(t, "169.254.32.0")
	for i := range Addr(1000) {
		b[first+i] = [2]time.Time{}
	}
	var reads int
	a, err := p.Next(first, b.taken(time.Now(), &reads))
	if err != nil || a != first+1000 {
		t.Fatalf("Next = %v, %v; want %v", a, err, first+1000)
	}
	if reads != 4 { // 256 + 256 + 256 + 232
		t.Errorf("%d reads of the taken addresses, want 4", reads)
	}
}

func TestUsage(t *testing.T) {
	now := time.Now()
	u := Usage(5, []*unyov1.AddressAllocation{
		{Address: "10.0.0.2", Holder: "a"},
		{Address: "10.0.0.3", Holder: "b", ReleasedAt: timestamp(now)},
	})
	if u.GetSize() != 5 || u.GetUsed() != 1 || u.GetQuarantined() != 1 || u.GetFree() != 3 {
		t.Errorf("usage %v", u)
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// A group of allocations takes the free addresses around the taken ones,
// onwards from the cursor and wrapping, in one pass.
func TestNextNSkipsTakenAndWraps(t *testing.T) {
	p, _ := NewPool(&unyov1.NetworkSpec{Cidr: "10.0.0.0/28", Gateway: "10.0.0.1"}) // .2-.14
	b := book{}
	for _, s := range []string{"10.0.0.10", "10.0.0.11", "10.0.0.13", "10.0.0.3"} {
		b[addr(t, s)] = [2]time.Time{}
	}
	var reads int
	got, err := p.NextN(addr(t, "10.0.0.10"), 5, b.taken(time.Now(), &reads))
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, a := range got {
		s = append(s, a.String())
	}
	if want := []string{"10.0.0.12", "10.0.0.14", "10.0.0.2", "10.0.0.4", "10.0.0.5"}; !slices.Equal(s, want) {
		t.Errorf("NextN = %v, want %v", s, want)
	}
	all, _ := p.NextN(0, 100, b.taken(time.Now(), &reads))
	if len(all) != 13-4 {
		t.Errorf("NextN of more than is free: %d addresses, want the 9 free", len(all))
	}
}
