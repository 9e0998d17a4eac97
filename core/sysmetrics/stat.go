package sysmetrics

// cpuModes names the columns of a cpu line of /proc/stat. Older kernels
// print a prefix of them: 4 columns before 2.6.0, 7 up to 2.6.10, then
// steal (2.6.11), guest (2.6.24) and guest_nice (2.6.33) were added.
var cpuModes = [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"}

// cpuBusyCols is the number of leading columns that partition CPU time:
// guest and guest_nice are already counted in user and nice, so summing
// them too would count guest time twice.
const cpuBusyCols = 8

const (
	cpuIdle   = 3
	cpuIowait = 4
)

type cpuEntry struct {
	gen    uint64
	n      int
	prev   [len(cpuModes)]uint64
	labels [len(cpuModes)][]Label
}

type statState struct {
	clk                         clock
	total                       cpuEntry
	cpus                        []*cpuEntry // by CPU number
	ctxt, intr, forks, softirqs counter
}

func (c *Collector) collectStat() {
	pz := c.p.stat
	data := c.read(pz, false)
	if data == nil {
		return
	}
	s := &c.stat
	dt, prev := c.begin(&s.clk)
	online := 0
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		key, rest := nextField(line)
		if len(key) >= 3 && string(key[:3]) == "cpu" {
			var cur [len(cpuModes)]uint64
			cols := 0
			bad := false
			for cols < len(cur) {
				var f []byte
				f, rest = nextField(rest)
				if len(f) == 0 {
					break
				}
				v, ok := parseUint(f)
				if !ok {
					bad = true
					break
				}
				cur[cols] = v
				cols++
			}
			if bad || cols < 4 {
				c.malformed(pz, n, "malformed cpu line")
				continue
			}
			if len(key) == 3 {
				c.cpuRates(&s.total, nil, &cur, cols, prev, "node_cpu_average_usage_ratio")
				continue
			}
			id, ok := parseUint(key[3:])
			if !ok || id > 1<<16 { // bounds the per-CPU slice
				c.malformed(pz, n, "bad cpu number")
				continue
			}
			online++
			c.cpuRates(s.cpu(int(id)), key[3:], &cur, cols, prev, "node_cpu_usage_ratio")
			continue
		}
		f, _ := nextField(rest)
		v, ok := parseUint(f)
		if !ok {
			switch string(key) {
			case "intr", "ctxt", "btime", "processes", "procs_running", "procs_blocked", "softirq":
				c.malformed(pz, n, "bad value for "+string(key))
			}
			continue
		}
		switch string(key) {
		case "intr": // the first number is the total over all interrupts
			c.rate(&s.intr, v, prev, dt, "node_intr_per_second", nil, 1)
		case "ctxt":
			c.rate(&s.ctxt, v, prev, dt, "node_context_switches_per_second", nil, 1)
		case "processes":
			c.rate(&s.forks, v, prev, dt, "node_forks_per_second", nil, 1)
		case "softirq":
			c.rate(&s.softirqs, v, prev, dt, "node_softirqs_per_second", nil, 1)
		case "btime":
			c.add("node_boot_time_seconds", nil, float64(v))
		case "procs_running":
			c.add("node_procs_running", nil, float64(v))
		case "procs_blocked":
			c.add("node_procs_blocked", nil, float64(v))
		}
	}
	if online > 0 {
		c.add("node_cpus_online", nil, float64(online))
	}
	c.done(&s.clk)
}

// cpu returns the state of CPU id, creating it on first sight.
func (s *statState) cpu(id int) *cpuEntry {
	for len(s.cpus) <= id {
		s.cpus = append(s.cpus, nil)
	}
	if s.cpus[id] == nil {
		s.cpus[id] = &cpuEntry{}
	}
	return s.cpus[id]
}

// userHZ is the unit of /proc/stat's CPU times (sysconf(_SC_CLK_TCK)),
// fixed at 100 by the kernel's user-space ABI.
const userHZ = 100

// cpuRates emits each mode's share of the CPU time elapsed since the
// previous reading. Shares need no USER_HZ and no wall clock: they are
// ratios of tick deltas. Another column going backwards makes the whole
// CPU skip one round, because its shares would no longer add up.
func (c *Collector) cpuRates(e *cpuEntry, id []byte, cur *[len(cpuModes)]uint64, cols int, prev uint64, name string) {
	if e.labels[0] == nil {
		for m := range cpuModes {
			if id == nil {
				e.labels[m] = labels1("mode", cpuModes[m])
			} else {
				e.labels[m] = []Label{{Name: "cpu", Value: string(id)}, {Name: "mode", Value: cpuModes[m]}}
			}
		}
	}
	if id != nil {
		// node_exporter's node_cpu_seconds_total{cpu,mode}: the ticks in
		// seconds (USER_HZ is 100 on every Linux architecture's ABI).
		for i := 0; i < cols; i++ {
			c.add("node_cpu_seconds_total", e.labels[i], float64(cur[i])/userHZ)
		}
	}
	ok := prev != 0 && e.gen == prev && e.n == cols
	var d [len(cpuModes)]uint64
	var total uint64
	for i := 0; ok && i < cols; i++ {
		if cur[i] < e.prev[i] {
			// proc(5): iowait "may decrease in certain situations", and
			// with NO_HZ idle can step back too: no progress, not a reset.
			if i == cpuIdle || i == cpuIowait {
				continue
			}
			ok = false
			break
		}
		d[i] = cur[i] - e.prev[i]
		if i < cpuBusyCols {
			total += d[i]
		}
	}
	if ok && total > 0 {
		for i := 0; i < cols; i++ {
			c.add(name, e.labels[i], float64(d[i])/float64(total))
		}
	}
	e.prev, e.n, e.gen = *cur, cols, c.gen
}

func (c *Collector) collectLoadavg() {
	pz := c.p.loadavg
	data := c.read(pz, true)
	if data == nil {
		return
	}
	// "0.20 0.18 0.12 1/80 11206": three averages, runnable/total
	// scheduling entities, last PID.
	line, _ := nextLine(data)
	var load [3]float64
	rest := line
	for i := range load {
		var f []byte
		f, rest = nextField(rest)
		v, ok := parseFloat(f)
		if !ok {
			c.malformed(pz, 1, "bad load average")
			return
		}
		load[i] = v
	}
	c.add("node_load1", nil, load[0])
	c.add("node_load5", nil, load[1])
	c.add("node_load15", nil, load[2])
	f, _ := nextField(rest)
	for i, ch := range f {
		if ch == '/' {
			run, ok1 := parseUint(f[:i])
			all, ok2 := parseUint(f[i+1:])
			if !ok1 || !ok2 {
				break
			}
			c.add("node_load_tasks_runnable", nil, float64(run))
			c.add("node_load_tasks", nil, float64(all))
			return
		}
	}
	c.malformed(pz, 1, "bad runnable/total field")
}

func (c *Collector) collectUptime() {
	pz := c.p.uptime
	data := c.read(pz, true)
	if data == nil {
		return
	}
	f, _ := nextField(data)
	f, _ = nextLine(f)
	v, ok := parseFloat(f)
	if !ok {
		c.malformed(pz, 1, "bad uptime")
		return
	}
	c.add("node_uptime_seconds", nil, v)
	// node_exporter's clock: dashboards show uptime as
	// node_time_seconds - node_boot_time_seconds.
	c.add("node_time_seconds", nil, float64(c.ts.UnixMilli())/1e3)
}
