package dataplane

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// pkt describes a test packet; build makes its bytes with every checksum
// computed in full.
type pkt struct {
	srcMAC, dstMAC net.HardwareAddr
	src, dst       netip.Addr
	proto          Proto // 0: ICMP echo
	sport, dport   uint16
	ttl            uint8
	frag           uint16 // the flags+offset field (0x2000: more fragments)
	noUDPCsum      bool
	payload        []byte
}

func (p pkt) build() []byte {
	var l4 []byte
	switch p.proto {
	case TCP:
		l4 = make([]byte, 20+len(p.payload))
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint32(l4[4:], 1)
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN
		binary.BigEndian.PutUint16(l4[14:], 65535)
		copy(l4[20:], p.payload)
	case UDP:
		l4 = make([]byte, 8+len(p.payload))
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		copy(l4[8:], p.payload)
	default:
		l4 = append([]byte{8, 0, 0, 0, 0, 1, 0, 1}, p.payload...)
		binary.BigEndian.PutUint16(l4[2:], checksum(0, l4))
	}
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(ip[4:], 0x1234)
	binary.BigEndian.PutUint16(ip[6:], p.frag)
	ip[8] = p.ttl
	if ip[8] == 0 {
		ip[8] = 64
	}
	ip[9] = byte(p.proto)
	if p.proto == 0 {
		ip[9] = 1
	}
	s, d := p.src.As4(), p.dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(0, ip))
	if p.proto == TCP || (p.proto == UDP && !p.noUDPCsum) {
		off := 16
		if p.proto == UDP {
			off = 6
		}
		binary.BigEndian.PutUint16(l4[off:], l4Checksum(ip, l4))
	}
	eth := make([]byte, 14)
	copy(eth[0:], p.dstMAC)
	copy(eth[6:], p.srcMAC)
	binary.BigEndian.PutUint16(eth[12:], 0x0800)
	return append(append(eth, ip...), l4...)
}

// checksum is the Internet checksum of b, starting from sum.
func checksum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// l4Checksum computes a TCP or UDP checksum in full (pseudo-header, with
// the checksum field taken as zero).
func l4Checksum(ip, l4 []byte) uint16 {
	b := append([]byte{}, l4...)
	off := 16
	if ip[9] == byte(UDP) {
		off = 6
	}
	b[off], b[off+1] = 0, 0
	ph := make([]byte, 12)
	copy(ph[0:], ip[12:20])
	ph[9] = ip[9]
	binary.BigEndian.PutUint16(ph[10:], uint16(len(l4)))
	var sum uint32
	for i := 0; i < len(ph); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ph[i:]))
	}
	c := checksum(sum, b)
	if ip[9] == byte(UDP) && c == 0 {
		c = 0xffff
	}
	return c
}

// parsed is what a test reads back from a packet the program returned.
type parsed struct {
	srcMAC, dstMAC net.HardwareAddr
	src, dst       netip.Addr
	sport, dport   uint16
	ttl            uint8
	ipCsumOK       bool
	l4Csum, l4Want uint16
}

func parse(b []byte) parsed {
	ip, l4 := b[14:34], b[34:]
	p := parsed{srcMAC: net.HardwareAddr(b[6:12]), dstMAC: net.HardwareAddr(b[0:6]), ttl: ip[8],
		src: netip.AddrFrom4([4]byte(ip[12:16])), dst: netip.AddrFrom4([4]byte(ip[16:20])),
		ipCsumOK: checksum(0, ip) == 0}
	tl := int(binary.BigEndian.Uint16(ip[2:])) - 20
	l4 = l4[:tl]
	if ip[9] == byte(TCP) || ip[9] == byte(UDP) {
		p.sport, p.dport = binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:])
		off := 16
		if ip[9] == byte(UDP) {
			off = 6
		}
		p.l4Csum = binary.BigEndian.Uint16(l4[off:])
		p.l4Want = l4Checksum(ip, l4)
	}
	return p
}
