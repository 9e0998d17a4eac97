package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/wal"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, dir string, log *bytes.Buffer, clk *clock, mod func(*wal.Options)) *wal.WAL {
	t.Helper()
	o := wal.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(log, nil)), Now: clk.now}
	if mod != nil {
		mod(&o)
	}
	w, err := wal.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func replayAll(t *testing.T, w *wal.WAL) []string {
	t.Helper()
	var got []string
	if err := w.Replay(func(rec []byte) error { got = append(got, string(rec)); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func appendAll(t *testing.T, w *wal.WAL, recs ...string) {
	t.Helper()
	for _, r := range recs {
		if err := w.Append(context.Background(), []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// TestReplayOrder: records come back in the order they were appended,
// across segments and across several runs.
func TestReplayOrder(t *testing.T) {
	dir, clk, log := t.TempDir(), &clock{t: time.Unix(1e9, 0)}, &bytes.Buffer{}
	w := open(t, dir, log, clk, func(o *wal.Options) { o.SegmentBytes = 40 })
	appendAll(t, w, "a1", "a2", "a3", "a4", "a5", "a6")
	w.Close()
	if n := len(segments(t, dir)); n < 2 {
		t.Fatalf("%d segments, want several (SegmentBytes is small)", n)
	}
	w = open(t, dir, log, clk, nil)
	appendAll(t, w, "b1", "b2")
	w.Close()
	w = open(t, dir, log, clk, nil)
	got := replayAll(t, w)
	want := []string{"a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2"}
	if !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	if log.Len() != 0 {
		t.Errorf("clean segments logged: %s", log)
	}
}

// TestDamagedTail: a torn or corrupt record ends its segment with a log
// line naming the file and offset; the records before it and the later
// segments are replayed.
func TestDamagedTail(t *testing.T) {
	cases := []struct {
		name   string
		damage func(data []byte) []byte
		why    string
	}{
		{"torn header", func(d []byte) []byte { return append(d, 5, 0) }, "torn record header"},
		{"torn payload", func(d []byte) []byte { return d[:len(d)-2] }, "torn record"},
		{"checksum mismatch", func(d []byte) []byte { d[len(d)-1] ^= 0xff; return d }, "checksum mismatch"},
		{"absurd length", func(d []byte) []byte {
			return append(d, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0)
		}, "record length out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, clk, log := t.TempDir(), &clock{t: time.Unix(1e9, 0)}, &bytes.Buffer{}
			w := open(t, dir, log, clk, nil)
			appendAll(t, w, "first", "second", "last")
			w.Close()
			seg := segments(t, dir)[0]
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seg, tc.damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			w = open(t, dir, log, clk, nil)
			appendAll(t, w, "next run")
			w.Close()

			w = open(t, dir, log, clk, nil)
			got := replayAll(t, w)
			want := []string{"first", "second", "last", "next run"}
			if tc.why != "torn record header" && tc.why != "record length out of range" {
				want = []string{"first", "second", "next run"} // "last" was damaged
			}
			if !slices.Equal(got, want) {
				t.Fatalf("replayed %q, want %q", got, want)
			}
			out := log.String()
			for _, s := range []string{"dropping the tail", seg, "offset=", tc.why} {
				if !strings.Contains(out, s) {
					t.Errorf("log %q does not contain %q", out, s)
				}
			}
		})
	}
}

// TestTrim: a segment is deleted only Keep after it was closed, and none
// before the segments of the previous run are replayed.
func TestTrim(t *testing.T) {
	dir, clk, log := t.TempDir(), &clock{t: time.Unix(1e9, 0)}, &bytes.Buffer{}
	opts := func(o *wal.Options) { o.RotateAfter, o.Keep = 5*time.Second, time.Minute }
	w := open(t, dir, log, clk, opts)
	appendAll(t, w, "old")
	w.Close()

	w = open(t, dir, log, clk, opts)
	appendAll(t, w, "one")
	clk.add(time.Hour)
	if err := w.Trim(); err != nil { // closes "one"'s segment
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 3 {
		t.Fatalf("%d segments after the first trim, want 3 (old, closed, active)", n)
	}
	if got := replayAll(t, w); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("old segments replayed %q, want [old]", got)
	}
	clk.add(time.Hour)
	if err := w.Trim(); err != nil {
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 3 {
		t.Fatalf("%d segments before Replayed, want 3: nothing is deleted before", n)
	}
	w.Replayed()
	appendAll(t, w, "two")
	clk.add(59 * time.Second)
	if err := w.Trim(); err != nil { // "one" goes (closed an hour ago), "two" is closed now
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 3 {
		t.Fatalf("%d segments before Keep passed for two, want 3 (old, two, active)", n)
	}
	clk.add(2 * time.Second)
	if err := w.Trim(); err != nil { // "old" goes, Keep after Replayed
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 2 {
		t.Fatalf("%d segments once Keep passed for old, want 2 (two, active)", n)
	}
	clk.add(time.Minute)
	if err := w.Trim(); err != nil { // "two" goes
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 1 {
		t.Fatalf("%d segments once Keep passed for two, want the active one", n)
	}
	w.Close()
	w = open(t, dir, log, clk, nil)
	if got := replayAll(t, w); len(got) != 0 {
		t.Fatalf("after trimming everything, replay found %q", got)
	}
}

// TestFull: Append fails with ErrFull at MaxBytes and works again once
// trimming made room.
func TestFull(t *testing.T) {
	dir, clk, log := t.TempDir(), &clock{t: time.Unix(1e9, 0)}, &bytes.Buffer{}
	w := open(t, dir, log, clk, func(o *wal.Options) { o.MaxBytes, o.Keep = 100, time.Second })
	rec := strings.Repeat("x", 30)
	appendAll(t, w, rec, rec)
	err := w.Append(context.Background(), []byte(rec))
	if !errors.Is(err, wal.ErrFull) {
		t.Fatalf("third append: %v, want ErrFull", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory", err)
	}
	clk.add(time.Hour)
	_ = w.Trim() // closes the segment
	clk.add(time.Hour)
	if err := w.Trim(); err != nil { // deletes it
		t.Fatal(err)
	}
	appendAll(t, w, rec)
}

// TestConcurrentAppends: records appended from many goroutines all come
// back, each once.
func TestConcurrentAppends(t *testing.T) {
	dir, clk, log := t.TempDir(), &clock{t: time.Unix(1e9, 0)}, &bytes.Buffer{}
	w := open(t, dir, log, clk, func(o *wal.Options) { o.SegmentBytes = 1 << 10 })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := w.Append(context.Background(), fmt.Appendf(nil, "g%d-%d", g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	w = open(t, dir, log, clk, nil)
	got := replayAll(t, w)
	if len(got) != 400 {
		t.Fatalf("replayed %d records, want 400", len(got))
	}
	slices.Sort(got)
	if len(slices.Compact(got)) != 400 {
		t.Fatal("a record came back twice")
	}
}

// BenchmarkAppend measures concurrent appends of 64 KiB records, the group
// commit sharing fsyncs.
func BenchmarkAppend(b *testing.B) {
	w, err := wal.Open(wal.Options{Dir: b.TempDir(), MaxBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := bytes.Repeat([]byte("x"), 64<<10)
	b.SetBytes(int64(len(rec)))
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := w.Append(context.Background(), rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
