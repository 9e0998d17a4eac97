package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// benchNodes makes n nodes of 64 vCPUs, 256 GiB and 2 TiB over 3 zones and
// racks of 40 nodes.
func benchNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		rack := i / 40
		nodes[i] = Node{
			Name:     fmt.Sprintf("node-%05d", i),
			Capacity: Resources{VCPUs: 64, MemoryBytes: 256 * gib, DiskBytes: 2048 * gib},
			Labels: map[string]string{
				lk("zone"):  fmt.Sprintf("z%d", rack%3),
				lk("rack"):  fmt.Sprintf("rack-%d", rack),
				lk("power"): fmt.Sprintf("p%d", rack%8),
			},
		}
	}
	return nodes
}

// benchPlace places b.N replicas, services of five replicas each with hard
// rack anti-affinity, a hard zone spread and soft power anti-affinity,
// `batch` replicas per Place call, and reports placements per second and the
// 99th percentile latency of one placement.
func benchPlace(b *testing.B, nodeCount, batch int) {
	nodes := benchNodes(nodeCount)
	byName := make(map[string]int, len(nodes))
	for i, n := range nodes {
		byName[n.Name] = i
	}
	pol := Policy{
		AntiAffinity:     []Term{{Key: lk("rack")}},
		Spread:           []Spread{{Key: lk("zone"), MaxSkew: 1}},
		SoftAntiAffinity: []Term{{Key: lk("power"), Weight: 2}},
	}
	shapes := []Resources{
		{VCPUs: 2, MemoryBytes: 8 * gib, DiskBytes: 50 * gib},
		{VCPUs: 4, MemoryBytes: 16 * gib, DiskBytes: 100 * gib},
		{VCPUs: 1, MemoryBytes: 2 * gib, DiskBytes: 20 * gib},
	}
	snap := NewSnapshot(nodes)
	lat := make([]time.Duration, 0, b.N)
	var req Request
	svc := 0
	b.ResetTimer()
	placed := 0
	for placed < b.N {
		if len(req.Existing) >= 5 || req.Service == "" {
			svc++
			req = Request{Service: fmt.Sprintf("svc-%d", svc), Shape: shapes[svc%len(shapes)], Policy: pol}
		}
		n := min(batch, 5-len(req.Existing), b.N-placed)
		start := time.Now()
		res := snap.Place(req, n)
		d := time.Since(start)
		if res.Unplaced > 0 {
			b.Fatalf("placement failed: %v", res.Reason)
		}
		for range res.Placed {
			lat = append(lat, d/time.Duration(len(res.Placed)))
		}
		b.StopTimer()
		for _, ch := range res.Placed {
			i := byName[ch.Node]
			nodes[i].Reserved = nodes[i].Reserved.Add(req.Shape)
			req.Existing = append(req.Existing, Placement{Node: ch.Node})
		}
		placed += len(res.Placed)
		b.StartTimer()
	}
	b.StopTimer()
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/total.Seconds(), "placements/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// One replica per Place call: every placement pays for indexing the nodes,
// the worst case and the figure the goal is about.
func BenchmarkPlace5000(b *testing.B)  { benchPlace(b, 5000, 1) }
func BenchmarkPlace10000(b *testing.B) { benchPlace(b, 10000, 1) }

// A whole service per call: the index is built once for five replicas.
func BenchmarkPlace5000Batch5(b *testing.B)  { benchPlace(b, 5000, 5) }
func BenchmarkPlace10000Batch5(b *testing.B) { benchPlace(b, 10000, 5) }

// BenchmarkFragmentation fills 500 mixed nodes with random flavors (default
// policy, bin-packing). It reports the fragmentation index up to 95% of the
// memory reserved: the share of requests that failed although the summed
// free capacity could have held them; then it keeps filling until 200
// requests in a row fail and reports the memory reserved at the first
// failure that the summed free capacity could have held (0: none did), at
// saturation, and how many such failures there were in all.
func BenchmarkFragmentation(b *testing.B) {
	fragmentation(b, []Resources{
		{VCPUs: 1, MemoryBytes: 2 * gib, DiskBytes: 20 * gib},
		{VCPUs: 2, MemoryBytes: 8 * gib, DiskBytes: 50 * gib},
		{VCPUs: 4, MemoryBytes: 16 * gib, DiskBytes: 100 * gib},
		{VCPUs: 8, MemoryBytes: 32 * gib, DiskBytes: 200 * gib},
		{VCPUs: 16, MemoryBytes: 64 * gib, DiskBytes: 400 * gib},
	})
}

// BenchmarkFragmentationSkewed uses large, memory- and compute-optimized
// flavors only, which leave holes no flavor fills.
func BenchmarkFragmentationSkewed(b *testing.B) {
	fragmentation(b, []Resources{
		{VCPUs: 4, MemoryBytes: 32 * gib, DiskBytes: 100 * gib},
		{VCPUs: 16, MemoryBytes: 32 * gib, DiskBytes: 200 * gib},
		{VCPUs: 8, MemoryBytes: 64 * gib, DiskBytes: 400 * gib},
		{VCPUs: 12, MemoryBytes: 48 * gib, DiskBytes: 300 * gib},
	})
}

func fragmentation(b *testing.B, flavors []Resources) {
	var frag95, firstFail, saturated, cpuSaturated float64
	var failedAll int
	for range b.N {
		r := rand.New(rand.NewPCG(1, 2))
		nodes := benchNodes(500)
		for i := range nodes {
			if i%3 == 1 { // a third are smaller machines
				nodes[i].Capacity = Resources{VCPUs: 32, MemoryBytes: 128 * gib, DiskBytes: 1024 * gib}
			}
		}
		var capa, used Resources
		for _, n := range nodes {
			capa = capa.Add(n.Capacity)
		}
		snap := NewSnapshot(nodes)
		byName := make(map[string]int, len(nodes))
		for i, n := range nodes {
			byName[n.Name] = i
		}
		util := func() float64 { return float64(used.MemoryBytes) / float64(capa.MemoryBytes) }
		failed95, attempts95, streak := 0, 0, 0
		firstFail, failedAll = 0, 0
		for streak < 200 {
			shape := flavors[r.IntN(len(flavors))]
			below95 := util() < 0.95
			if below95 {
				attempts95++
			}
			res := snap.Place(Request{Service: fmt.Sprintf("s%d", attempts95), Shape: shape}, 1)
			if res.Unplaced > 0 {
				streak++
				if shape.Fits(capa.Sub(used)) {
					failedAll++
					if below95 {
						failed95++
					}
					if firstFail == 0 {
						firstFail = util()
					}
				}
				continue
			}
			streak = 0
			i := byName[res.Placed[0].Node]
			nodes[i].Reserved = nodes[i].Reserved.Add(shape)
			used = used.Add(shape)
		}
		frag95 = float64(failed95) / float64(attempts95)
		saturated = util()
		cpuSaturated = float64(used.VCPUs) / float64(capa.VCPUs)
	}
	b.ReportMetric(frag95, "frag-index-to-95%")
	b.ReportMetric(100*firstFail, "mem-%-at-first-fail")
	b.ReportMetric(100*saturated, "mem-%-saturated")
	b.ReportMetric(100*cpuSaturated, "vcpu-%-saturated")
	b.ReportMetric(float64(failedAll), "failed-fitting-sum")
}
