// Package cell formats values for table cells: label sets and command
// lines. The printer and the kinds' table columns share it.
package cell

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Labels prints a map as sorted k=v pairs, or none if it is empty.
func Labels(m map[string]string, none string) string {
	if len(m) == 0 {
		return none
	}
	pairs := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, k+"="+m[k])
	}
	return strings.Join(pairs, ",")
}

// Command prints argv as one would type it, quoting words that need it.
func Command(argv []string) string {
	if len(argv) == 0 {
		return "-"
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}();&|<>#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words[i] = a
	}
	return strings.Join(words, " ")
}

// FirstFew joins the first show items of a list that may be long and
// counts the rest: "a, b, c and 4 more".
func FirstFew(items []string, show int) string {
	if len(items) <= show {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:show], ", "), len(items)-show)
}

// Age is how long ago ts was, in one unit: 12s, 3m, 2h, 4d, 3y; "-" when
// unset. Hours run to 48 so that "30h" is not rounded down to "1d".
func Age(now time.Time, ts *timestamppb.Timestamp) string {
	if ts == nil || (ts.GetSeconds() == 0 && ts.GetNanos() == 0) {
		return "-"
	}
	d := now.Sub(ts.AsTime())
	if d < 0 {
		d = 0 // another host's clock ran ahead
	}
	const day = 24 * time.Hour
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d < 2*365*day:
		return fmt.Sprintf("%dd", d/day)
	default:
		return fmt.Sprintf("%dy", d/(365*day))
	}
}
