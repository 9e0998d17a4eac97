package sysmetrics

import "bytes"

type netState struct {
	clk  clock
	hdr  []byte   // the two header lines the layout was built from
	cols []string // metric name of each value column
	cur  []uint64
	devs map[string]*netDev
}

type netDev struct {
	gen    uint64
	labels []Label
	prev   []uint64
	// wide is set once any counter of the device exceeded 32 bits: its
	// counters are 64-bit and a decrease can only be a reset.
	wide bool
}

// collectNetDev reads /proc/net/dev. Columns are located by the names in
// its two header lines ("Inter-| Receive | Transmit" then the field names
// of each section), so reordered or added columns are handled.
func (c *Collector) collectNetDev() {
	pz := c.p.netdev
	data := c.read(pz, false)
	if data == nil {
		return
	}
	s := &c.net
	h1, rest := nextLine(data)
	h2, rest := nextLine(rest)
	hdrLen := len(h1) + 1 + len(h2)
	if hdrLen > len(data) {
		hdrLen = len(data)
	}
	if !bytes.Equal(s.hdr, data[:hdrLen]) {
		cols, ok := netDevColumns(h1, h2)
		if !ok {
			c.malformed(pz, 2, "unrecognized header")
			return
		}
		s.hdr = append(s.hdr[:0], data[:hdrLen]...)
		s.cols = cols
		s.cur = make([]uint64, len(cols))
		s.devs = make(map[string]*netDev) // old readings have another layout
	}
	data = rest
	dt, prev := c.begin(&s.clk)
	for n := 3; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		if len(trimSpace(line)) == 0 {
			continue
		}
		// "  eth0: 123 ..." and, on old kernels, "  eth0:1234567890 ..."
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			c.malformed(pz, n, "missing ':' after interface name")
			continue
		}
		name := trimSpace(line[:colon])
		vals := line[colon+1:]
		k := 0
		bad := len(name) == 0
		for !bad {
			var f []byte
			f, vals = nextField(vals)
			if len(f) == 0 {
				break
			}
			v, ok := parseUint(f)
			if !ok || k == len(s.cur) {
				bad = true
				break
			}
			s.cur[k] = v
			k++
		}
		if bad || k != len(s.cur) {
			c.malformed(pz, n, "malformed interface line")
			continue
		}
		d := s.devs[string(name)]
		if d == nil {
			d = &netDev{labels: labels1("device", string(name)), prev: make([]uint64, len(s.cur))}
			s.devs[string(name)] = d
		}
		c.netRates(d, s.cur, s.cols, prev, dt)
	}
	for k, d := range s.devs {
		if d.gen != c.gen {
			delete(s.devs, k)
		}
	}
	c.done(&s.clk)
}

// netDevColumns derives one metric name per value column from the header,
// e.g. "node_network_receive_bytes_per_second".
func netDevColumns(h1, h2 []byte) ([]string, bool) {
	titles := bytes.Split(h1, []byte{'|'})
	fields := bytes.Split(h2, []byte{'|'})
	if len(titles) != len(fields) || len(titles) < 2 {
		return nil, false
	}
	var cols []string
	for i := 1; i < len(titles); i++ {
		dir := bytes.ToLower(bytes.TrimSpace(titles[i]))
		if len(dir) == 0 {
			return nil, false
		}
		for _, f := range bytes.Fields(fields[i]) {
			cols = append(cols, metricName("node_network_"+string(dir)+"_", f, "_per_second"))
		}
	}
	return cols, len(cols) > 0
}

// netRates emits the interface's rates. Interface counters are 64-bit on
// 64-bit kernels, but on 32-bit kernels (and with some old drivers) they
// wrap at 2^32. A decrease is taken as such a wrap only if the counter
// has always fit in 32 bits and it fell by more than 2^31 (it was near the
// top); any other decrease is a reset (the interface was re-created),
// which skips the whole interface for one round.
func (c *Collector) netRates(d *netDev, cur []uint64, names []string, prev uint64, dt float64) {
	ok := prev != 0 && d.gen == prev
	for i := 0; ok && i < len(cur); i++ {
		if p := d.prev[i]; cur[i] < p && (d.wide || p > 1<<32-1 || p-cur[i] <= 1<<31) {
			ok = false
		}
	}
	for i, v := range cur {
		c.total(names[i], d.labels, float64(v))
		if ok {
			dv, _ := delta(d.prev[i], v, true)
			c.add(names[i], d.labels, float64(dv)/dt)
		}
		if v > 1<<32-1 {
			d.wide = true
		}
	}
	copy(d.prev, cur)
	d.gen = c.gen
}

// snmpSection is the cached layout of one "Prefix: names" header line.
type snmpSection struct {
	file   int
	prefix string
	hdr    []byte
	n      int       // number of names in hdr
	cols   []snmpCol // ascending by col
}

type snmpCol struct {
	col   int
	name  string
	gauge bool
	slot  int // index into snmpState.ctr
}

type snmpState struct {
	clk      [2]clock
	sections []*snmpSection
	ctr      []counter
	slots    map[string]int
}

// snmpField selects the reported fields of /proc/net/snmp and
// /proc/net/netstat; gauge marks the one that is not a counter.
func snmpField(prefix, field []byte) (wanted, gauge bool) {
	switch string(prefix) {
	case "Tcp":
		switch string(field) {
		case "CurrEstab":
			return true, true
		case "ActiveOpens", "PassiveOpens", "AttemptFails", "EstabResets", "InSegs",
			"OutSegs", "RetransSegs", "InErrs", "OutRsts", "InCsumErrors":
			return true, false
		}
	case "Udp":
		switch string(field) {
		case "InDatagrams", "NoPorts", "InErrors", "OutDatagrams", "RcvbufErrors",
			"SndbufErrors", "InCsumErrors":
			return true, false
		}
	case "Ip":
		switch string(field) {
		case "InReceives", "InDelivers", "OutRequests", "ForwDatagrams", "InDiscards", "OutDiscards":
			return true, false
		}
	case "TcpExt":
		switch string(field) {
		case "ListenOverflows", "ListenDrops", "TCPTimeouts", "TCPSynRetrans",
			"SyncookiesSent", "SyncookiesRecv", "SyncookiesFailed", "TCPAbortOnTimeout":
			return true, false
		}
	}
	return false, false
}

func (c *Collector) collectSNMP() {
	c.snmpFile(0, c.p.snmp)
	c.snmpFile(1, c.p.netstat)
}

// snmpFile reads a file of "Prefix: name name..." / "Prefix: value
// value..." line pairs, finding each value by its header name.
func (c *Collector) snmpFile(file int, pz []byte) {
	data := c.read(pz, false)
	if data == nil {
		return
	}
	s := &c.snmp
	dt, prev := c.begin(&s.clk[file])
	n := 0 // line number
	for len(data) > 0 {
		var hdr, vals []byte
		hdr, data = nextLine(data)
		n++
		if len(trimSpace(hdr)) == 0 {
			continue
		}
		vals, data = nextLine(data)
		n++
		prefix, hnames := nextField(hdr)
		vprefix, vvals := nextField(vals)
		if len(prefix) < 2 || prefix[len(prefix)-1] != ':' || !bytes.Equal(prefix, vprefix) {
			c.malformed(pz, n-1, "header line without matching value line")
			return // the pairing is lost; nothing after it can be trusted
		}
		prefix = prefix[:len(prefix)-1]
		sec := c.snmpSection(file, prefix, hnames)
		if sec == nil {
			continue
		}
		if countFields(vvals) != sec.n {
			// Values can only be matched to names if they pair up.
			c.malformed(pz, n, "value count differs from header")
			continue
		}
		ci := 0
		for j := 0; ci < len(sec.cols); j++ {
			var f []byte
			f, vvals = nextField(vvals)
			if sec.cols[ci].col != j {
				continue
			}
			col := &sec.cols[ci]
			ci++
			v, ok := parseUint(f)
			if !ok {
				c.malformed(pz, n, "bad value for "+col.name)
				continue
			}
			if col.gauge {
				c.add(col.name, nil, float64(v))
			} else {
				c.rate(&s.ctr[col.slot], v, prev, dt, col.name, nil, 1)
			}
		}
	}
	c.done(&s.clk[file])
}

// snmpSection returns the layout for a header, rebuilding it when the
// header differs from the cached one (only on the first reading, in
// practice), or nil if no field of the prefix is reported.
func (c *Collector) snmpSection(file int, prefix, hnames []byte) *snmpSection {
	s := &c.snmp
	var sec *snmpSection
	for _, x := range s.sections {
		if x.file == file && x.prefix == string(prefix) {
			sec = x
			break
		}
	}
	if sec != nil && bytes.Equal(sec.hdr, hnames) {
		if len(sec.cols) == 0 {
			return nil
		}
		return sec
	}
	if sec == nil {
		if !knownSNMPPrefix(prefix) {
			return nil
		}
		sec = &snmpSection{file: file, prefix: string(prefix)}
		s.sections = append(s.sections, sec)
	}
	if s.slots == nil {
		s.slots = make(map[string]int)
	}
	sec.hdr = append(sec.hdr[:0], hnames...)
	sec.cols = sec.cols[:0]
	rest := hnames
	for j := 0; ; j++ {
		var f []byte
		f, rest = nextField(rest)
		if len(f) == 0 {
			sec.n = j
			break
		}
		wanted, gauge := snmpField(prefix, f)
		if !wanted {
			continue
		}
		col := snmpCol{col: j, gauge: gauge}
		if gauge {
			col.name = metricName("node_netstat_"+string(prefix)+"_", f, "")
		} else {
			col.name = metricName("node_netstat_"+string(prefix)+"_", f, "_per_second")
			slot, ok := s.slots[col.name]
			if !ok {
				slot = len(s.ctr)
				s.ctr = append(s.ctr, counter{})
				s.slots[col.name] = slot
			}
			s.ctr[slot] = counter{} // the column may have moved: no rate this round
			col.slot = slot
		}
		sec.cols = append(sec.cols, col)
	}
	if len(sec.cols) == 0 {
		return nil
	}
	return sec
}

func knownSNMPPrefix(prefix []byte) bool {
	switch string(prefix) {
	case "Tcp", "Udp", "Ip", "TcpExt":
		return true
	}
	return false
}

func countFields(b []byte) int {
	n := 0
	for {
		var f []byte
		f, b = nextField(b)
		if len(f) == 0 {
			return n
		}
		n++
	}
}
