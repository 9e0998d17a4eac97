// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// unyo's XDP L4 load balancer: a stateless DNAT in the style of Katran.
//
// Forward path (XDP on the node's interface): an IPv4 TCP or UDP packet
// whose destination VIP:port:protocol is a service is sent to one of the
// service's backends, chosen by a Maglev lookup table indexed by a hash of
// the packet's 5-tuple. The destination address (and port, when the target
// port differs) are rewritten with incremental checksum updates, the MACs
// come from the kernel's FIB (bpf_fib_lookup), and the packet leaves by
// XDP_TX (same interface) or XDP_REDIRECT (another one). Everything else
// goes to the kernel untouched (XDP_PASS).
//
// Return path (TC egress on the same interface): a reply whose source is a
// backend's address:target-port gets the VIP:port back as its source, so
// the client sees the address it connected to.
//
// All tables are maps written by the plugin in place; the programs are
// never reloaded to change backends.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Sizes shared with the Go side (../dataplane.go): keep them equal.
#define RING_SIZE 16381 // Maglev table entries per service, a prime
#define MAX_SERVICES 64 // VIP:port:protocol entries per node
#define MAX_BACKENDS 256 // backends per service (lb.MaxBackends)
#define NO_BACKEND 0xffffffff

// Global counters (index into the stats map).
enum {
	STAT_TX = 0,        // forwarded out of the ingress interface (XDP_TX)
	STAT_REDIRECT,      // forwarded out of another interface (XDP_REDIRECT)
	STAT_KERNEL,        // rewritten, handed to the kernel to forward (no FIB/neighbour entry yet)
	STAT_NO_BACKEND,    // to a VIP whose table is empty: dropped
	STAT_FRAGMENT,      // IPv4 fragments: passed unbalanced
	STAT_REPLY,         // replies rewritten back to the VIP on egress
	STAT_MAX,
};

// TCX verdicts (linux/bpf.h of Linux 6.6+; older headers lack them).
#ifndef TCX_NEXT
#define TCX_NEXT -1
#endif

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

struct svc_key {
	__u32 vip;   // network order
	__u16 port;  // network order
	__u8 proto;  // IPPROTO_TCP or IPPROTO_UDP
	__u8 pad;
};

struct svc {
	__u32 slot;        // index of the service's Maglev table and counters
	__u16 target_port; // network order: the backends' port
	__u16 pad;
};

struct backend {
	__u32 addr; // network order; 0 = empty slot
	__u32 pad;
};

struct rev_key {
	__u32 addr; // backend address, network order
	__u16 port; // backend (target) port, network order
	__u8 proto;
	__u8 pad;
};

struct rev {
	__u32 vip;  // network order
	__u16 port; // network order
	__u16 pad;
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES);
	__type(key, struct svc_key);
	__type(value, struct svc);
} services SEC(".maps");

// ring[slot*RING_SIZE + i] is the backend (index within the service) of
// hash bucket i of the service in slot.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SERVICES * RING_SIZE);
	__uint(map_flags, BPF_F_MMAPABLE); // the plugin reads a table in one copy
	__type(key, __u32);
	__type(value, __u32);
} ring SEC(".maps");

// backends[slot*MAX_BACKENDS + b] is backend b of the service in slot.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SERVICES * MAX_BACKENDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES * MAX_BACKENDS);
	__type(key, struct rev_key);
	__type(value, struct rev);
} reverse SEC(".maps");

// Packets and bytes forwarded per service slot.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct counter);
} service_stats SEC(".maps");

// Packets dropped per service slot because its table was empty.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct counter);
} service_drops SEC(".maps");

// Packets and bytes forwarded per backend (same index as backends).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SERVICES * MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct counter);
} backend_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, struct counter);
} stats SEC(".maps");

static __always_inline void count(void *map, __u32 key, __u64 bytes)
{
	struct counter *c = bpf_map_lookup_elem(map, &key);
	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

// flow_hash mixes the 5-tuple (murmur3's 64-bit finalizer). FlowHash in
// dataplane.go is the same function.
static __always_inline __u64 flow_hash(__u32 saddr, __u32 daddr, __u16 sport, __u16 dport, __u8 proto)
{
	__u64 h = ((__u64)saddr << 32) | daddr;
	h ^= (((__u64)sport << 32) | ((__u64)dport << 16) | proto) * 0x9e3779b97f4a7c15ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static __always_inline __u16 csum_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

// csum_replace4 and csum_replace2 update a ones'-complement checksum for a
// changed field (RFC 1624: HC' = ~(~HC + ~m + m')).
static __always_inline __u16 csum_replace4(__u16 check, __u32 from, __u32 to)
{
	__u32 s = (__u16)~check;
	s += (__u16)~(from & 0xffff);
	s += (__u16)~(from >> 16);
	s += to & 0xffff;
	s += to >> 16;
	return csum_fold(s);
}

static __always_inline __u16 csum_replace2(__u16 check, __u16 from, __u16 to)
{
	__u32 s = (__u16)~check;
	s += (__u16)~from;
	s += to;
	return csum_fold(s);
}

SEC("xdp")
int unyo_lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 len = end - data;

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	// IP options are rare and would shift the L4 header: passed.
	if ((void *)(ip + 1) > end || ip->ihl != 5)
		return XDP_PASS;
	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
		// A non-first fragment has no ports to hash: fragments are
		// left to the kernel rather than balanced inconsistently.
		count(&stats, STAT_FRAGMENT, len);
		return XDP_PASS;
	}

	struct svc_key key = {.vip = ip->daddr, .proto = ip->protocol};
	__u16 sport, *dport, *check;
	int udp = ip->protocol == IPPROTO_UDP;
	if (udp) {
		struct udphdr *uh = (void *)(ip + 1);
		if ((void *)(uh + 1) > end)
			return XDP_PASS;
		sport = uh->source;
		dport = &uh->dest;
		check = &uh->check;
	} else {
		struct tcphdr *th = (void *)(ip + 1);
		if ((void *)(th + 1) > end)
			return XDP_PASS;
		sport = th->source;
		dport = &th->dest;
		check = &th->check;
	}
	key.port = *dport;
	struct svc *s = bpf_map_lookup_elem(&services, &key);
	if (!s)
		return XDP_PASS;
	__u32 slot = s->slot;
	if (slot >= MAX_SERVICES)
		return XDP_PASS;

	__u32 bucket = slot * RING_SIZE + (__u32)(flow_hash(ip->saddr, ip->daddr, sport, key.port, key.proto) % RING_SIZE);
	__u32 *b = bpf_map_lookup_elem(&ring, &bucket);
	if (!b || *b >= MAX_BACKENDS) {
		count(&service_drops, slot, len);
		count(&stats, STAT_NO_BACKEND, len);
		return XDP_DROP;
	}
	__u32 bid = slot * MAX_BACKENDS + *b;
	struct backend *be = bpf_map_lookup_elem(&backends, &bid);
	if (!be || !be->addr) {
		count(&service_drops, slot, len);
		count(&stats, STAT_NO_BACKEND, len);
		return XDP_DROP;
	}
	count(&service_stats, slot, len);
	count(&backend_stats, bid, len);

	// DNAT: destination address and port, with the IP checksum and the
	// L4 checksum (whose pseudo-header covers the address) updated.
	__u32 daddr = ip->daddr, naddr = be->addr;
	__u16 nport = s->target_port;
	ip->daddr = naddr;
	ip->check = csum_replace4(ip->check, daddr, naddr);
	// A UDP checksum of 0 means none: it stays 0.
	if (!udp || *check) {
		__u16 c = csum_replace4(*check, daddr, naddr);
		if (nport && nport != *dport)
			c = csum_replace2(c, *dport, nport);
		if (udp && c == 0)
			c = 0xffff;
		*check = c;
	}
	if (nport && nport != *dport)
		*dport = nport;

	struct bpf_fib_lookup fib = {};
	fib.family = 2; // AF_INET
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = naddr;
	fib.ifindex = ctx->ingress_ifindex;
	int rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || ip->ttl <= 1) {
		// No route or neighbour entry yet (or the TTL runs out): the
		// kernel forwards the rewritten packet, resolving the
		// neighbour (or answering time-exceeded) on the way.
		count(&stats, STAT_KERNEL, len);
		return XDP_PASS;
	}
	// Forwarded like a router would: TTL down by one.
	__u16 old_ttl = *(__u16 *)&ip->ttl;
	ip->ttl--;
	ip->check = csum_replace2(ip->check, old_ttl, *(__u16 *)&ip->ttl);
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	if (fib.ifindex == ctx->ingress_ifindex) {
		count(&stats, STAT_TX, len);
		return XDP_TX;
	}
	count(&stats, STAT_REDIRECT, len);
	return bpf_redirect(fib.ifindex, 0);
}

#define IP_SRC_OFF (ETH_HLEN + __builtin_offsetof(struct iphdr, saddr))
#define IP_CSUM_OFF (ETH_HLEN + __builtin_offsetof(struct iphdr, check))
#define L4_OFF (ETH_HLEN + sizeof(struct iphdr))

SEC("tcx/egress")
int unyo_lb_reply(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (data + L4_OFF + sizeof(struct tcphdr) > end) {
		// Headers may sit in paged data (a short UDP reply cannot be
		// pulled that far: then only the UDP header is needed).
		bpf_skb_pull_data(skb, L4_OFF + sizeof(struct udphdr));
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
	}
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TCX_NEXT;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl != 5 || (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
		return TCX_NEXT;
	__u8 proto = ip->protocol;
	__u16 sport;
	__u32 csum_off, port_off;
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = (void *)(ip + 1);
		if ((void *)(uh + 1) > end)
			return TCX_NEXT;
		sport = uh->source;
		csum_off = L4_OFF + __builtin_offsetof(struct udphdr, check);
		port_off = L4_OFF + __builtin_offsetof(struct udphdr, source);
	} else if (proto == IPPROTO_TCP) {
		struct tcphdr *th = (void *)(ip + 1);
		if ((void *)(th + 1) > end)
			return TCX_NEXT;
		sport = th->source;
		csum_off = L4_OFF + __builtin_offsetof(struct tcphdr, check);
		port_off = L4_OFF + __builtin_offsetof(struct tcphdr, source);
	} else {
		return TCX_NEXT;
	}
	struct rev_key key = {.addr = ip->saddr, .port = sport, .proto = proto};
	struct rev *r = bpf_map_lookup_elem(&reverse, &key);
	if (!r)
		return TCX_NEXT;
	__u32 saddr = ip->saddr, vip = r->vip;
	__u16 vport = r->port;
	__u64 len = skb->len;
	// The kernel's helpers, not our own arithmetic: the skb may carry a
	// partial (offloaded) checksum that they know how to update.
	__u64 l4flags = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	bpf_l4_csum_replace(skb, csum_off, saddr, vip, l4flags | BPF_F_PSEUDO_HDR | sizeof(vip));
	bpf_l3_csum_replace(skb, IP_CSUM_OFF, saddr, vip, sizeof(vip));
	bpf_skb_store_bytes(skb, IP_SRC_OFF, &vip, sizeof(vip), 0);
	if (vport != sport) {
		bpf_l4_csum_replace(skb, csum_off, sport, vport, l4flags | sizeof(vport));
		bpf_skb_store_bytes(skb, port_off, &vport, sizeof(vport), 0);
	}
	count(&stats, STAT_REPLY, len);
	return TCX_NEXT;
}

char _license[] SEC("license") = "Dual MIT/GPL";
