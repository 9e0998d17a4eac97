package eventrules

import (
	"math"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Counter is the occurrence state of one node/check: how many consecutive
// results had Level. The pipeline stores it (it must survive restarts) and
// passes it back to Occur with the next result. The zero Counter means no
// result yet.
type Counter struct {
	Level unyov1.Level
	Count int
}

// Occur counts one more result and says whether it raises an event. Count
// is the number of consecutive results at the same level, for every level
// including success, so a Counter always means one thing. A non-OK result
// raises once Count reaches N = e.Occurrences (N <= 1 means every result);
// a result at another level than the previous one starts again at 1, so a
// flip from warning to critical needs N critical results. A success result
// always raises: recovery must never wait, and repeats of it are the
// reissue window's business. Any level other than success, including
// UNSPECIFIED, counts as non-OK, so a malformed result cannot hide a
// problem. Count saturates instead of overflowing.
func Occur(prev Counter, e *unyov1.Event) (next Counter, raise bool) {
	level := e.GetLevel()
	next = Counter{Level: level, Count: 1}
	if prev.Level == level && prev.Count > 0 {
		next.Count = prev.Count
		if next.Count < math.MaxInt32 {
			next.Count++
		}
	}
	if level == unyov1.Level_LEVEL_SUCCESS {
		return next, true
	}
	n := int(e.GetOccurrences())
	if n < 1 {
		n = 1
	}
	return next, next.Count >= n
}

// Issued is what the pipeline remembers of the last processed event of one
// node/check: its level and when it was processed.
type Issued struct {
	Level unyov1.Level
	At    time.Time
}

// Reissue reports whether an event should be processed, given the last one
// processed for the same node/check (have is false when there was none).
// It is processed when there was none, when its level differs (a change is
// always news), or when the reissue window (e.Reissue; zero or negative
// means no window) has passed since the last one: now-prev.At >= window.
// Within the window a repeat at the same level is suppressed.
//
// The seeds' implementation had this comparison inverted and processed
// only repeats inside the window; the tests pin the direction.
func Reissue(prev Issued, have bool, e *unyov1.Event, now time.Time) bool {
	if !have || prev.Level != e.GetLevel() {
		return true
	}
	window := e.GetReissue().AsDuration()
	if window <= 0 {
		return true
	}
	return now.Sub(prev.At) >= window
}
