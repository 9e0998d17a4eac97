package promapi

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Binary operators root evaluates itself (see eval.go).

var arith = map[string]func(a, b float64) float64{
	"+": func(a, b float64) float64 { return a + b },
	"-": func(a, b float64) float64 { return a - b },
	"*": func(a, b float64) float64 { return a * b },
	"/": func(a, b float64) float64 { return a / b },
	"%": math.Mod,
	"^": math.Pow,
}

var compare = map[string]func(a, b float64) bool{
	"==": func(a, b float64) bool { return a == b },
	"!=": func(a, b float64) bool { return a != b },
	">":  func(a, b float64) bool { return a > b },
	"<":  func(a, b float64) bool { return a < b },
	">=": func(a, b float64) bool { return a >= b },
	"<=": func(a, b float64) bool { return a <= b },
}

// binary applies an arithmetic or comparison operator with Prometheus'
// vector matching (on, ignoring, group_left, group_right), as
// VictoriaMetrics' binary_op.go does.
type binary struct {
	op         string
	isBool     bool
	on         string   // "", on, ignoring
	matchArgs  []string // labels of on/ignoring
	join       string   // "", group_left, group_right
	joinArgs   []string
	rightIsCmp bool // the right operand is a vector comparison: NaN there drops the point
	l, r       node
}

func isScalarVec(ss []*vec) bool { return len(ss) == 1 && len(ss[0].labels) == 0 }

func (b binary) value(a, c float64) float64 {
	if f, ok := arith[b.op]; ok {
		return f(a, c)
	}
	ok := compare[b.op](a, c)
	if !b.isBool {
		if ok {
			return a
		}
		return math.NaN()
	}
	switch {
	case math.IsNaN(a):
		return math.NaN()
	case ok:
		return 1
	}
	return 0
}

func (b binary) resetName(l map[string]string) map[string]string {
	if _, ok := compare[b.op]; ok && !b.isBool {
		return l
	}
	return withoutName(l)
}

func (b binary) eval(c *evalCtx) ([]*vec, error) {
	ls, err := b.l.eval(c)
	if err != nil {
		return nil, err
	}
	rs, err := b.r.eval(c)
	if err != nil {
		return nil, err
	}
	if b.op == "and" || b.op == "unless" {
		return b.filter(ls, rs), nil
	}
	if _, cmp := compare[b.op]; !cmp {
		ls, rs = dropEmpty(ls), dropEmpty(rs)
	}
	if len(ls) == 0 || len(rs) == 0 {
		return nil, nil
	}
	left, right, dst, err := b.pair(ls, rs)
	if err != nil {
		return nil, err
	}
	for i := range left {
		lv, rv, dv := left[i].v, right[i].v, dst[i].v
		for j := range lv {
			if b.rightIsCmp && math.IsNaN(rv[j]) && !math.IsNaN(lv[j]) {
				dv[j] = math.NaN()
				continue
			}
			dv[j] = b.value(lv[j], rv[j])
		}
	}
	return dst, nil
}

// filter is `and` (left's points where a matching right series has one)
// and `unless` (where none has), labels unchanged.
func (b binary) filter(ls, rs []*vec) []*vec {
	right := map[string][]*vec{}
	for _, s := range rs {
		k := b.matchKey(s.labels)
		right[k] = append(right[k], s)
	}
	var out []*vec
	for _, s := range ls {
		tr := right[b.matchKey(s.labels)]
		if len(tr) == 0 {
			if b.op == "unless" {
				out = append(out, s)
			}
			continue
		}
		d := &vec{labels: s.labels, v: slices.Clone(s.v)}
		for i := range d.v {
			has := slices.ContainsFunc(tr, func(r *vec) bool { return !math.IsNaN(r.v[i]) })
			if has == (b.op == "unless") {
				d.v[i] = math.NaN()
			}
		}
		if !empty(d) {
			out = append(out, d)
		}
	}
	return out
}

// matchKey is the label set series are matched on: all but the name, or
// as on/ignoring say.
func (b binary) matchKey(l map[string]string) string {
	l = withoutName(l)
	if b.on == "on" {
		return labelsKey(groupLabels(l, "by", b.matchArgs))
	}
	out := maps.Clone(l)
	for _, a := range b.matchArgs {
		delete(out, a)
	}
	return labelsKey(out)
}

// pair lines up the operands: left[i] op right[i] is written into dst[i].
func (b binary) pair(ls, rs []*vec) (left, right, dst []*vec, err error) {
	fresh := func(s *vec, labels map[string]string) *vec {
		return &vec{labels: labels, v: slices.Clone(s.v)}
	}
	if b.on == "" && b.join == "" {
		switch {
		case isScalarVec(ls):
			for _, r := range rs {
				left, right, dst = append(left, ls[0]), append(right, r), append(dst, fresh(r, b.resetName(r.labels)))
			}
			return left, right, dst, nil
		case isScalarVec(rs):
			for _, l := range ls {
				left, right, dst = append(left, l), append(right, rs[0]), append(dst, fresh(l, b.resetName(l.labels)))
			}
			return left, right, dst, nil
		}
	}
	byKey := func(ss []*vec) (map[string][]*vec, []string) {
		m := map[string][]*vec{}
		var order []string
		for _, s := range ss {
			k := b.matchKey(s.labels)
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = append(m[k], s)
		}
		return m, order
	}
	mLeft, order := byKey(ls)
	mRight, _ := byKey(rs)
	for _, k := range order {
		tl, tr := mLeft[k], mRight[k]
		if len(tr) == 0 {
			continue
		}
		switch b.join {
		case "group_left", "group_right":
			many, one := tl, tr
			if b.join == "group_right" {
				many, one = tr, tl
			}
			single, err := b.single(one, "one")
			if err != nil {
				return nil, nil, nil, err
			}
			for _, m := range many {
				l := maps.Clone(b.resetName(m.labels))
				for _, a := range b.joinArgs {
					if b.on == "on" && slices.Contains(b.matchArgs, a) {
						continue
					}
					if v, ok := single.labels[a]; ok {
						l[a] = v
					} else {
						delete(l, a)
					}
				}
				if b.join == "group_left" {
					left, right = append(left, m), append(right, single)
				} else {
					left, right = append(left, single), append(right, m)
				}
				dst = append(dst, fresh(m, l))
			}
		default:
			sl, err := b.single(tl, "left")
			if err != nil {
				return nil, nil, nil, err
			}
			sr, err := b.single(tr, "right")
			if err != nil {
				return nil, nil, nil, err
			}
			l := b.resetName(sl.labels)
			if b.on == "on" {
				l = groupLabels(l, "by", b.matchArgs)
			} else {
				l = maps.Clone(l)
				for _, a := range b.matchArgs {
					delete(l, a)
				}
			}
			left, right, dst = append(left, sl), append(right, sr), append(dst, fresh(sl, l))
		}
	}
	return left, right, dst, nil
}

// single is the one series of a match group; VictoriaMetrics merges series
// whose points do not overlap (a label changed value) and refuses others.
func (b binary) single(ss []*vec, side string) (*vec, error) {
	if len(ss) == 1 {
		return ss[0], nil
	}
	out := &vec{labels: ss[0].labels, v: slices.Clone(ss[0].v)}
	for _, s := range ss[1:] {
		overlaps := 0
		for i, v := range s.v {
			if !math.IsNaN(v) && !math.IsNaN(out.v[i]) {
				overlaps++
			}
		}
		if overlaps > 2 || len(s.v) <= 2 {
			return nil, fmt.Errorf("duplicate series on the %s side of %s: %s and %s", side, b.op, labelsString(ss[0].labels), labelsString(s.labels))
		}
		for i, v := range s.v {
			if !math.IsNaN(v) {
				out.v[i] = v
			}
		}
	}
	return out, nil
}

func labelsString(l map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+strconv.Quote(l[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func withoutName(l map[string]string) map[string]string {
	if _, ok := l["__name__"]; !ok {
		return l
	}
	out := maps.Clone(l)
	delete(out, "__name__")
	return out
}
