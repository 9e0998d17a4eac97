package sysmetrics

import "strconv"

// memName caches the metric name derived from a meminfo key, so that
// steady-state collections build no strings.
type memName struct {
	name string
	kB   bool // the name was built for a value in kB (with _bytes)
}

type memState struct {
	names map[string]memName
}

// metricName turns a kernel field name into a metric name: "Active(anon)"
// becomes "Active_anon" as in node_exporter, and anything else outside
// [a-zA-Z0-9_] becomes '_'.
func metricName(prefix string, key []byte, suffix string) string {
	b := make([]byte, 0, len(prefix)+len(key)+len(suffix))
	b = append(b, prefix...)
	for _, ch := range key {
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_':
			b = append(b, ch)
		case ch == ')':
		default:
			b = append(b, '_')
		}
	}
	return string(append(b, suffix...))
}

// memLine parses the "Key:   value [kB]" tail of a meminfo line.
func memLine(line []byte) (key []byte, v uint64, kB bool, ok bool) {
	key, rest := nextField(line)
	if len(key) < 2 || key[len(key)-1] != ':' {
		return nil, 0, false, false
	}
	key = key[:len(key)-1]
	f, rest := nextField(rest)
	v, ok = parseUint(f)
	if !ok {
		return nil, 0, false, false
	}
	unit, rest := nextField(rest)
	if extra, _ := nextField(rest); len(extra) != 0 {
		return nil, 0, false, false
	}
	switch string(unit) {
	case "":
	case "kB":
		kB = true
	default:
		return nil, 0, false, false
	}
	return key, v, kB, true
}

// emitMem adds one meminfo-style field: values in kB become bytes, and
// unitless ones (HugePages_Total and friends, which count pages) are
// reported as they are.
func (c *Collector) emitMem(names *map[string]memName, prefix string, key []byte, v uint64, kB bool, labels []Label) {
	if *names == nil {
		*names = make(map[string]memName)
	}
	n, ok := (*names)[string(key)]
	if !ok || n.kB != kB {
		suffix := ""
		if kB {
			suffix = "_bytes"
		}
		n = memName{metricName(prefix, key, suffix), kB}
		(*names)[string(key)] = n
	}
	if kB {
		c.add(n.name, labels, float64(v)*1024)
	} else {
		c.add(n.name, labels, float64(v))
	}
}

func (c *Collector) collectMeminfo() {
	pz := c.p.meminfo
	data := c.read(pz, false)
	if data == nil {
		return
	}
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		if len(trimSpace(line)) == 0 {
			continue
		}
		key, v, kB, ok := memLine(line)
		if !ok {
			c.malformed(pz, n, "malformed meminfo line")
			continue
		}
		c.emitMem(&c.mem.names, "node_memory_", key, v, kB, nil)
	}
}

type numaState struct {
	nodes map[string]*numaNode // by directory name, "node0"
	list  []*numaNode          // nodes seen in this collection
	names map[string]memName
}

type numaNode struct {
	gen      uint64
	labels   []Label
	id       string
	meminfo  []byte // NUL-terminated paths
	hugeDir  []byte
	dir      string
	hugepage map[string]*hugeEntry // by directory name, "hugepages-2048kB"
}

type hugeEntry struct {
	gen               uint64
	labels            []Label
	nr, free, surplus []byte
}

// collectNUMA reports /sys/devices/system/node/node*/meminfo and the
// per-node hugepage pools. The node list is read on every collection
// because nodes can come and go with memory hotplug.
func (c *Collector) collectNUMA() {
	s := &c.numa
	if s.nodes == nil {
		s.nodes = make(map[string]*numaNode)
	}
	s.list = s.list[:0]
	err := c.dirents(c.p.nodes, func(_ int, name []byte) bool {
		if len(name) < 5 || string(name[:4]) != "node" || !isDigits(name[4:]) {
			return true
		}
		nd := s.nodes[string(name)]
		if nd == nil {
			dir := pathString(c.p.nodes) + "/" + string(name)
			nd = &numaNode{
				id:       string(name[4:]),
				dir:      dir,
				meminfo:  cpath(dir, "/meminfo"),
				hugeDir:  cpath(dir, "/hugepages"),
				hugepage: make(map[string]*hugeEntry),
			}
			nd.labels = labels1("numa_node", nd.id)
			s.nodes[string(name)] = nd
		}
		nd.gen = c.gen
		s.list = append(s.list, nd)
		return true
	})
	if err != nil {
		c.fail(err)
	}
	for _, nd := range s.list {
		c.numaMeminfo(nd)
		c.numaHugepages(nd)
	}
	for k, nd := range s.nodes {
		if nd.gen != c.gen {
			delete(s.nodes, k)
		}
	}
}

func (c *Collector) numaMeminfo(nd *numaNode) {
	pz := nd.meminfo
	data := c.read(pz, false)
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		if len(trimSpace(line)) == 0 {
			continue
		}
		// "Node 0 MemTotal:       7694540 kB"
		f, rest := nextField(line)
		id, rest := nextField(rest)
		if string(f) != "Node" || !isDigits(id) {
			c.malformed(pz, n, "malformed node meminfo line")
			continue
		}
		key, v, kB, ok := memLine(rest)
		if !ok {
			c.malformed(pz, n, "malformed node meminfo line")
			continue
		}
		c.emitMem(&c.numa.names, "node_memory_numa_", key, v, kB, nd.labels)
	}
}

func (c *Collector) numaHugepages(nd *numaNode) {
	err := c.dirents(nd.hugeDir, func(_ int, name []byte) bool {
		h := nd.hugepage[string(name)]
		if h == nil {
			// "hugepages-2048kB"
			const pre, suf = "hugepages-", "kB"
			if len(name) <= len(pre)+len(suf) || string(name[:len(pre)]) != pre || string(name[len(name)-len(suf):]) != suf {
				return true
			}
			kb, ok := parseUint(name[len(pre) : len(name)-len(suf)])
			if !ok {
				return true
			}
			dir := nd.dir + "/hugepages/" + string(name) + "/"
			h = &hugeEntry{
				labels:  []Label{{Name: "numa_node", Value: nd.id}, {Name: "size", Value: strconv.FormatUint(kb*1024, 10)}},
				nr:      cpath(dir, "nr_hugepages"),
				free:    cpath(dir, "free_hugepages"),
				surplus: cpath(dir, "surplus_hugepages"),
			}
			nd.hugepage[string(name)] = h
		}
		h.gen = c.gen
		c.sysfsValue(h.nr, "node_memory_numa_hugepages", h.labels)
		c.sysfsValue(h.free, "node_memory_numa_hugepages_free", h.labels)
		c.sysfsValue(h.surplus, "node_memory_numa_hugepages_surplus", h.labels)
		return true
	})
	if err != nil {
		c.fail(err)
	}
	for k, h := range nd.hugepage {
		if h.gen != c.gen {
			delete(nd.hugepage, k)
		}
	}
}

// sysfsValue emits a sysfs attribute holding one unsigned number.
func (c *Collector) sysfsValue(pz []byte, name string, labels []Label) {
	data := c.read(pz, true)
	if data == nil {
		return
	}
	line, _ := nextLine(data)
	v, ok := parseUint(trimSpace(line))
	if !ok {
		c.malformed(pz, 1, "not a number")
		return
	}
	c.add(name, labels, float64(v))
}

// vmstat counters reported as rates; pgpgin/pgpgout count KiB and
// pswpin/pswpout count pages, both converted to bytes.
const (
	vmPgpgin = iota
	vmPgpgout
	vmPswpin
	vmPswpout
	vmPgfault
	vmPgmajfault
	vmOOMKill
	vmCount
)

var vmNames = [vmCount]string{
	"node_vmstat_pgpgin_bytes_per_second",
	"node_vmstat_pgpgout_bytes_per_second",
	"node_vmstat_pswpin_bytes_per_second",
	"node_vmstat_pswpout_bytes_per_second",
	"node_vmstat_pgfault_per_second",
	"node_vmstat_pgmajfault_per_second",
	"node_vmstat_oom_kill_per_second",
}

type vmState struct {
	clk clock
	ctr [vmCount]counter
}

func (c *Collector) collectVmstat() {
	pz := c.p.vmstat
	data := c.read(pz, false)
	if data == nil {
		return
	}
	s := &c.vm
	dt, prev := c.begin(&s.clk)
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		key, rest := nextField(line)
		i, scale := -1, 1.0
		switch string(key) {
		case "pgpgin":
			i, scale = vmPgpgin, 1024
		case "pgpgout":
			i, scale = vmPgpgout, 1024
		case "pswpin":
			i, scale = vmPswpin, c.pageSize
		case "pswpout":
			i, scale = vmPswpout, c.pageSize
		case "pgfault":
			i = vmPgfault
		case "pgmajfault":
			i = vmPgmajfault
		case "oom_kill":
			i = vmOOMKill
		}
		if i < 0 {
			continue
		}
		f, _ := nextField(rest)
		v, ok := parseUint(f)
		if !ok {
			c.malformed(pz, n, "bad value for "+string(key))
			continue
		}
		c.rate(&s.ctr[i], v, prev, dt, vmNames[i], nil, scale)
	}
	c.done(&s.clk)
}

type buddyState struct {
	zones map[string]*buddyZone // by node + "\x00" + zone
	key   []byte
}

type buddyZone struct {
	gen         uint64
	node, zone  string
	orderLabels [][]Label
}

func (c *Collector) collectBuddyinfo() {
	pz := c.p.buddyinfo
	data := c.read(pz, false)
	if data == nil {
		return
	}
	s := &c.buddy
	if s.zones == nil {
		s.zones = make(map[string]*buddyZone)
	}
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		if len(trimSpace(line)) == 0 {
			continue
		}
		// "Node 0, zone   Normal    106      4   1755 ..."
		f1, rest := nextField(line)
		node, rest := nextField(rest)
		f3, rest := nextField(rest)
		zone, rest := nextField(rest)
		if string(f1) != "Node" || len(node) < 2 || node[len(node)-1] != ',' || !isDigits(node[:len(node)-1]) ||
			string(f3) != "zone" || len(zone) == 0 {
			c.malformed(pz, n, "malformed buddyinfo line")
			continue
		}
		node = node[:len(node)-1]
		s.key = append(append(append(s.key[:0], node...), 0), zone...)
		z := s.zones[string(s.key)]
		if z == nil {
			z = &buddyZone{node: string(node), zone: string(zone)}
			s.zones[string(s.key)] = z
		}
		z.gen = c.gen
		start := len(c.out)
		for order := 0; ; order++ {
			var f []byte
			f, rest = nextField(rest)
			if len(f) == 0 {
				break
			}
			v, ok := parseUint(f)
			if !ok {
				c.out = c.out[:start] // drop the line's partial output
				c.malformed(pz, n, "bad free block count")
				break
			}
			if order == len(z.orderLabels) {
				z.orderLabels = append(z.orderLabels, []Label{{Name: "numa_node", Value: z.node}, {Name: "order", Value: strconv.Itoa(order)}, {Name: "zone", Value: z.zone}})
			}
			c.add("node_buddyinfo_blocks", z.orderLabels[order], float64(v))
		}
	}
	for k, z := range s.zones {
		if z.gen != c.gen {
			delete(s.zones, k)
		}
	}
}
