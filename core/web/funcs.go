package web

import (
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// funcs are the templates' helpers: names from unyov1's tables, times in
// UTC, sizes in binary units.
var funcs = template.FuncMap{
	"level":       func(l unyov1.Level) string { return l.Name() },
	"alertLevel":  func(l unyov1.AlertLevel) string { return l.Name() },
	"alertState":  func(s unyov1.AlertState) string { return s.Name() },
	"nodeState":   func(s unyov1.NodeState) string { return s.DisplayName() },
	"status":      func(s unyov1.CheckStatus) string { return s.Name() },
	"ts":          ts,
	"iso":         iso,
	"dur":         dur,
	"bytes":       humanBytes,
	"sorted":      sortedPairs,
	"join":        strings.Join,
	"query":       query,
	"svg":         func(s string) template.HTML { return template.HTML(s) }, // only for SVG the console drew itself
	"add":         func(a, b int) int { return a + b },
	"rows":        groupRows,
	"navItems":    func() []string { return navItems },
	"title":       func(s string) string { return strings.ToUpper(s[:1]) + s[1:] },
	"computeHref": func(cp *unyov1.Compute) template.URL { return template.URL(computeHref(cp)) },
	"percent":     percent,
	// emptyGroup is the pattern the page's script copies for a group that
	// appears while the page is open.
	"emptyGroup": func() alertGroup { return alertGroup{Key: "", Label: "", Class: "grp"} },
}

// navItems are the pages in the main navigation, by path.
var navItems = []string{"alerts", "events", "nodes", "services", "rules", "maintenance", "racks", "networks", "graph"}

// tsLayout is how pages show a time: in UTC, to the second.
const tsLayout = "2006-01-02 15:04:05Z"

func ts(t *timestamppb.Timestamp) string {
	if t == nil || (t.GetSeconds() == 0 && t.GetNanos() == 0) {
		return "-"
	}
	return t.AsTime().UTC().Format(tsLayout)
}

func iso(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func dur(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

type pair struct{ K, V string }

func sortedPairs(m map[string]string) []pair {
	out := make([]pair, 0, len(m))
	for k, v := range m {
		out = append(out, pair{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
	return out
}

// query builds a query string from name/value pairs, leaving out empty
// values: {{query "id" .Id "cluster" .Cluster}}.
func query(kv ...string) template.URL {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(template.URLQueryEscaper(kv[i]))
		b.WriteByte('=')
		b.WriteString(template.URLQueryEscaper(kv[i+1]))
	}
	return template.URL(b.String())
}

// percent is part of whole, as "(25%)", or "" without a whole; CPUs
// are int32, bytes int64.
func percent(part, whole any) string {
	p, w := toInt64(part), toInt64(whole)
	if w <= 0 {
		return ""
	}
	return fmt.Sprintf("(%d%%)", p*100/w)
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int32:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}
