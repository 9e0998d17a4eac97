// Package maglev builds Maglev lookup tables (Eisenbud et al., "Maglev: A
// Fast and Reliable Software Network Load Balancer", NSDI 2016): a table
// of M buckets, each naming a backend, filled so that every backend owns
// a share of buckets proportional to its weight, and so that adding or
// removing one backend moves few buckets besides its own share. A packet's
// 5-tuple hash picks the bucket, so a flow keeps its backend as long as
// its bucket does.
//
// The table depends only on the set of backends (their keys and weights),
// not on their order, so that a restarted plugin computes the same table.
package maglev

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Backend is one entry: Key identifies it (the address), Weight is its
// relative share (0 means 1).
type Backend struct {
	Key    string
	Weight int
}

// Empty marks a bucket of a table without backends.
const Empty = -1

// Table returns m buckets, each an index into backends (Empty for all when
// there are none). m must be a prime larger than the number of backends,
// so that every permutation visits every bucket.
func Table(backends []Backend, m int) []int {
	t := make([]int, m)
	for i := range t {
		t[i] = Empty
	}
	if len(backends) == 0 || m <= 1 {
		return t
	}
	// Fill in key order so that the caller's order does not matter.
	order := make([]int, len(backends))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(backends[a].Key, backends[b].Key) })
	offset := make([]uint64, len(backends))
	skip := make([]uint64, len(backends))
	next := make([]uint64, len(backends))
	for i, b := range backends {
		offset[i] = hash("offset", b.Key) % uint64(m)
		skip[i] = hash("skip", b.Key)%uint64(m-1) + 1
	}
	filled := 0
	for {
		for _, i := range order {
			// A weight of w takes w buckets per round.
			for range max(backends[i].Weight, 1) {
				c := (offset[i] + next[i]*skip[i]) % uint64(m)
				for t[c] != Empty {
					next[i]++
					c = (offset[i] + next[i]*skip[i]) % uint64(m)
				}
				t[c] = i
				next[i]++
				filled++
				if filled == m {
					return t
				}
			}
		}
	}
}

func hash(salt, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(key))
	// FNV's low bits vary little between similar keys (10.0.0.1,
	// 10.0.0.2): the finalizer spreads them.
	return Mix64(h.Sum64())
}

// Mix64 is murmur3's 64-bit finalizer: every input bit affects every
// output bit.
func Mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
