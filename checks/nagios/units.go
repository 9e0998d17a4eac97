package nagios

import (
	"bytes"
	"strconv"
)

// Units that BaseValue reports.
const (
	UnitSeconds = "seconds"
	UnitBytes   = "bytes"
	UnitPercent = "percent"
	UnitCounter = "counter"
)

// BaseValue converts the value to its base unit: s, ms and us to seconds; B,
// KB, MB, GB and TB to bytes; % to percent and c to counter with the value
// unchanged; no UOM stays a plain number with unit "". Any other UOM is
// returned as printed, with the value unchanged.
//
// KB, MB, GB and TB are taken as powers of 1024. The guidelines do not say,
// but the reference plugins compute them so: check_disk -u GB counts in
// units of 1024^3 bytes and labels them GiB in its text (see
// testdata/corpus/check_disk_gb.txt). The IEC spellings KiB, MiB, GiB and
// TiB are accepted as the same. Units are matched case-sensitively: "kb"
// might be kilobits, and guessing would corrupt the graph.
func (p Perf) BaseValue() (value float64, unit string) {
	v := p.Value
	switch p.UOM {
	case "":
		return v, ""
	case "s":
		return v, UnitSeconds
	case "ms":
		return shift10(v, -3), UnitSeconds
	case "us":
		return shift10(v, -6), UnitSeconds
	case "B":
		return v, UnitBytes
	case "KB", "KiB":
		return v * (1 << 10), UnitBytes
	case "MB", "MiB":
		return v * (1 << 20), UnitBytes
	case "GB", "GiB":
		return v * (1 << 30), UnitBytes
	case "TB", "TiB":
		return v * (1 << 40), UnitBytes
	case "%":
		return v, UnitPercent
	case "c":
		return v, UnitCounter
	}
	return v, p.UOM
}

// shift10 returns v*10^exp computed on v's shortest decimal form, so that a
// printed 0.015 ms becomes the float nearest 1.5e-05 s; v/1e3 would be off
// by one ulp and show up as 1.4999999999999999e-05 in every export.
func shift10(v float64, exp int) float64 {
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], v, 'e', -1, 64)
	i := bytes.IndexByte(b, 'e')
	if i < 0 { // NaN or an infinity: nothing to shift
		return v
	}
	e, err := strconv.Atoi(string(b[i+1:]))
	if err != nil {
		return v
	}
	b = strconv.AppendInt(b[:i+1], int64(e+exp), 10)
	f, _ := strconv.ParseFloat(string(b), 64) // underflow rounds to 0, which is right
	return f
}
