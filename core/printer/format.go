package printer

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer/cell"
)

// age is how long ago ts was, in one unit (cell.Age).
func age(now time.Time, ts *timestamppb.Timestamp) string { return cell.Age(now, ts) }

// humanBytes prints a size in binary units, with one decimal below 10:
// 512MiB, 7.5GiB, 16GiB.
func humanBytes(n int64) string {
	if n <= 0 {
		return "-"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i > 0 && f < 9.95 {
		return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + units[i]
	}
	return strconv.FormatFloat(f, 'f', 0, 64) + units[i]
}

// truncate shortens s to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// firstLine is a plugin output's status line: Nagios plugins put the
// summary first and details (and perfdata) after.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// clean keeps a table cell on one line and its tabs from breaking the
// alignment; the values come from plugins and operators.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func level(l unyov1.Level) string {
	if l == unyov1.Level_LEVEL_UNSPECIFIED {
		return "-"
	}
	return l.Name()
}

// status prints a plugin status the way Nagios does: OK, WARNING, ...
func status(s unyov1.CheckStatus) string { return strings.ToUpper(s.Name()) }
