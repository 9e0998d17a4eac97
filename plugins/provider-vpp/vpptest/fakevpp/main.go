// Command fakevpp serves vpptest's fake VPP on a unix socket, for running
// unyo-provider-vpp by hand or `unyo plugin conformance` against it
// without a VPP:
//
//	go run ./plugins/provider-vpp/vpptest/fakevpp -socket /tmp/vpp/api.sock -foreign 10.255.0.1
//
// -foreign adds an all-port VIP "someone else" configured, which the
// conformance fixtures' failing resource collides with.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/lb_types"

	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
	"github.com/unyo-ops/unyo/plugins/provider-vpp/vpptest"
)

func main() {
	socket := flag.String("socket", "/run/vpp/api.sock", "the socket to serve")
	foreign := flag.String("foreign", "", "an IPv4 address to hold an all-port gre4 VIP on")
	flag.Parse()
	vpp := vpptest.New()
	if *foreign != "" {
		a, err := netip.ParseAddr(*foreign)
		if err != nil || !a.Is4() {
			fmt.Fprintf(os.Stderr, "fakevpp: -foreign must be an IPv4 address, not %q\n", *foreign)
			os.Exit(2)
		}
		vpp.Handle(&lb.LbAddDelVip{Pfx: vppaddr.Prefix(netip.PrefixFrom(a, 32)), Protocol: vppaddr.AnyProtocol,
			Encap: lb_types.LB_API_ENCAP_TYPE_GRE4, NewFlowsTableLength: 1024})
	}
	s, err := vpptest.Serve(vpp, *socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakevpp:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "fakevpp: serving on", *socket)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Stop()
}
