package eventrules_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

func TestOccur(t *testing.T) {
	c := func(l unyov1.Level, n int) eventrules.Counter { return eventrules.Counter{Level: l, Count: n} }
	tests := []struct {
		name      string
		prev      eventrules.Counter
		level     unyov1.Level
		n         int32
		want      eventrules.Counter
		wantRaise bool
	}{
		{"first warning, N=3", eventrules.Counter{}, warning, 3, c(warning, 1), false},
		{"second warning, N=3", c(warning, 1), warning, 3, c(warning, 2), false},
		{"third warning raises, N=3", c(warning, 2), warning, 3, c(warning, 3), true},
		{"fourth warning still raises", c(warning, 3), warning, 3, c(warning, 4), true},
		{"warning to critical resets", c(warning, 5), critical, 3, c(critical, 1), false},
		{"critical to warning resets", c(critical, 2), warning, 2, c(warning, 1), false},
		{"success in between resets", c(success, 1), warning, 2, c(warning, 1), false},
		{"N=1 raises at once", eventrules.Counter{}, critical, 1, c(critical, 1), true},
		{"N=0 means 1", eventrules.Counter{}, critical, 0, c(critical, 1), true},
		{"negative N means 1", eventrules.Counter{}, warning, -4, c(warning, 1), true},
		{"N=1 after a flip raises", c(warning, 7), critical, 1, c(critical, 1), true},
		{"recovery always raises", c(critical, 9), success, 5, c(success, 1), true},
		{"recovery before N reached raises", c(warning, 1), success, 5, c(success, 1), true},
		{"success repeats count", c(success, 4), success, 5, c(success, 5), true},
		{"first result success", eventrules.Counter{}, success, 3, c(success, 1), true},
		{"unspecified level counts as non-OK", eventrules.Counter{}, unyov1.Level_LEVEL_UNSPECIFIED, 2, c(unyov1.Level_LEVEL_UNSPECIFIED, 1), false},
		{"unspecified level repeats", c(unyov1.Level_LEVEL_UNSPECIFIED, 1), unyov1.Level_LEVEL_UNSPECIFIED, 2, c(unyov1.Level_LEVEL_UNSPECIFIED, 2), true},
		{"a corrupt zero count starts over", c(warning, 0), warning, 2, c(warning, 1), false},
		{"a corrupt negative count starts over", c(warning, -3), warning, 1, c(warning, 1), true},
		{"count saturates", c(critical, math.MaxInt32), critical, 3, c(critical, math.MaxInt32), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, raise := eventrules.Occur(tt.prev, &unyov1.Event{Level: tt.level, Occurrences: tt.n})
			if got != tt.want || raise != tt.wantRaise {
				t.Errorf("Occur = %+v, %v; want %+v, %v", got, raise, tt.want, tt.wantRaise)
			}
		})
	}
}

// A sequence as the pipeline sees it, with N=3.
func TestOccurSequence(t *testing.T) {
	seq := []struct {
		level unyov1.Level
		raise bool
	}{
		{success, true}, {warning, false}, {warning, false}, {critical, false}, {critical, false},
		{critical, true}, {critical, true}, {success, true}, {warning, false}, {warning, false}, {warning, true},
	}
	var c eventrules.Counter
	for i, s := range seq {
		var raise bool
		c, raise = eventrules.Occur(c, &unyov1.Event{Level: s.level, Occurrences: 3})
		if raise != s.raise {
			t.Errorf("result %d (%v): raise = %v, want %v (counter %+v)", i, s.level, raise, s.raise, c)
		}
	}
}

func TestReissue(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	prev := eventrules.Issued{Level: critical, At: t0}
	ev := func(l unyov1.Level, window time.Duration) *unyov1.Event {
		e := &unyov1.Event{Level: l}
		if window != 0 {
			e.Reissue = durationpb.New(window)
		}
		return e
	}
	tests := []struct {
		name  string
		prev  eventrules.Issued
		have  bool
		event *unyov1.Event
		now   time.Time
		want  bool
	}{
		{"nothing issued yet", eventrules.Issued{}, false, ev(critical, time.Hour), t0, true},
		{"same level inside the window is suppressed", prev, true, ev(critical, time.Hour), t0.Add(time.Minute), false},
		{"same level at once is suppressed", prev, true, ev(critical, time.Hour), t0, false},
		{"one nanosecond before the window ends", prev, true, ev(critical, time.Hour), t0.Add(time.Hour - 1), false},
		{"exactly at the window's end", prev, true, ev(critical, time.Hour), t0.Add(time.Hour), true},
		{"after the window", prev, true, ev(critical, time.Hour), t0.Add(2 * time.Hour), true},
		{"level change inside the window", prev, true, ev(warning, time.Hour), t0.Add(time.Second), true},
		{"recovery inside the window", prev, true, ev(success, time.Hour), t0.Add(time.Second), true},
		{"no window: every time", prev, true, ev(critical, 0), t0, true},
		{"negative window: every time", prev, true, ev(critical, -time.Minute), t0, true},
		{"clock behind the last issue is inside the window", prev, true, ev(critical, time.Hour), t0.Add(-time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventrules.Reissue(tt.prev, tt.have, tt.event, tt.now); got != tt.want {
				t.Errorf("Reissue = %v, want %v", got, tt.want)
			}
		})
	}
}

// The seeds processed only the repeats inside the window. Walk a minute-by-
// minute stream of the same critical result with a 5m window: exactly one
// event in every five is processed.
func TestReissueDirection(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var last eventrules.Issued
	have := false
	var processed []string
	for i := range 11 {
		now := t0.Add(time.Duration(i) * time.Minute)
		e := &unyov1.Event{Level: critical, Reissue: durationpb.New(5 * time.Minute)}
		if eventrules.Reissue(last, have, e, now) {
			last, have = eventrules.Issued{Level: e.Level, At: now}, true
			processed = append(processed, fmt.Sprint(i))
		}
	}
	if got := fmt.Sprint(processed); got != "[0 5 10]" {
		t.Errorf("processed minutes %s, want [0 5 10]", got)
	}
}
