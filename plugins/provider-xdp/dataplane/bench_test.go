package dataplane

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkProgram runs the XDP program in BPF_PROG_TEST_RUN's repeat mode
// (the kernel loops and times the runs; no syscall per packet) and reports
// packets per second: a forwarded TCP packet (5-tuple hash, Maglev lookup,
// DNAT with checksum updates, FIB lookup, MAC and TTL rewrite, counters)
// and a TCP packet to no VIP (parsed, looked up, passed).
//
// Repeat mode runs the program on one buffer, so its changes carry over
// from run to run: the forwarded case uses a service whose only backend is
// its own address and port, so that the rewritten packet matches it again
// and every run does a full forward, and runs at most repeat times per
// call so that the TTL (from 255, one less per run) never runs out.
func BenchmarkProgram(b *testing.B) {
	r := newRigB(b)
	self := Service{Key: Key{VIP: backendA, Port: 8080, Proto: TCP}, TargetPort: 8080, Backends: []Backend{{Addr: backendA, InTable: true}}}
	if err := r.d.Apply([]Service{self}); err != nil {
		b.Fatal(err)
	}
	const repeat = 250
	for _, c := range []struct {
		name string
		p    pkt
		want uint32
	}{
		{"forwarded", pkt{srcMAC: clientMAC, dstMAC: r.v0.MAC, src: client, dst: backendA, proto: TCP, sport: 40000, dport: 8080, ttl: 255, payload: make([]byte, 64)}, xdpRedirect},
		{"passed", pkt{srcMAC: clientMAC, dstMAC: r.v0.MAC, src: client, dst: unrouted, proto: TCP, sport: 40000, dport: 80, payload: make([]byte, 64)}, xdpPass},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := c.p.build()
			var total time.Duration
			runs := 0
			// One thread in the namespace for every call.
			if err := r.ns.Do(func() error {
				for runs < b.N {
					n := min(repeat, b.N-runs)
					ret, per, err := r.d.XDPProgram().Benchmark(in, n, nil)
					if err != nil {
						return err
					}
					if ret != c.want {
						return fmt.Errorf("verdict %d, want %d", ret, c.want)
					}
					total += per * time.Duration(n)
					runs += n
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(runs), "ns/op")
			b.ReportMetric(float64(runs)/total.Seconds(), "pkts/s")
		})
	}
}
