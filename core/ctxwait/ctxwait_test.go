package ctxwait

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep with a live context: want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep with an ended context: want false")
	}
}

// Periodic loops wake at the instants of their phase: the agent's outboxes
// and its log tailer share them.
func TestNextTick(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now   time.Time
		phase time.Duration
		want  time.Time
	}{
		{t0, 0, t0.Add(time.Second)},
		{t0.Add(400 * time.Millisecond), 0, t0.Add(time.Second)},
		{t0.Add(400 * time.Millisecond), 600 * time.Millisecond, t0.Add(600 * time.Millisecond)},
		{t0.Add(700 * time.Millisecond), 600 * time.Millisecond, t0.Add(1600 * time.Millisecond)},
	} {
		if got := NextTick(c.now, time.Second, c.phase); !got.Equal(c.want) {
			t.Errorf("NextTick(%s, phase %s) = %s, want %s", c.now.Format("15:04:05.000"), c.phase, got.Format("15:04:05.000"), c.want.Format("15:04:05.000"))
		}
	}
}
