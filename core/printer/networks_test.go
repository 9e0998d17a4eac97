package printer

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestNetworkDetails(t *testing.T) {
	ts := func(sec int) *timestamppb.Timestamp { return timestamppb.New(now().Add(-timeSec(sec))) }
	n := &unyov1.Network{Name: "net-a", Spec: &unyov1.NetworkSpec{Cidr: "10.0.0.0/29", Gateway: "10.0.0.1", Scope: "cluster", Cluster: "c1",
		Reserved: []string{"10.0.0.6"}},
		Usage: &unyov1.NetworkUsage{Size: 4, Used: 1, Free: 2, Quarantined: 1, Allocations: []*unyov1.AddressAllocation{
			{Network: "net-a", Address: "10.0.0.2", Holder: "compute/web-0/eth0", AllocatedAt: ts(600)},
			{Network: "net-a", Address: "10.0.0.3", Holder: "compute/web-1/eth0", AllocatedAt: ts(7200), ReleasedAt: ts(60), ReusableAt: ts(-3540)},
		}}}
	var buf bytes.Buffer
	p, err := newPrinter(&buf, Table, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.networkDetails([]*unyov1.Object{{Kind: &unyov1.Object_Network{Network: n}}}); err != nil {
		t.Fatal(err)
	}
	golden(t, "network_details.txt.golden", buf.Bytes())
}

func timeSec(s int) time.Duration { return time.Duration(s) * time.Second }
