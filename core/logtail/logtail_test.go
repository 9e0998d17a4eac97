package logtail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/unyo-ops/unyo/core/testutil"
)

// syncBuffer collects log output of the tailer for assertions.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// collector is an out callback that keeps what it is given.
type collector struct {
	mu   sync.Mutex
	recs []Record
	// fail, when set, is asked about every batch before it is accepted.
	fail func(batch []Record) error
}

func (c *collector) out(batch []Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		if err := c.fail(batch); err != nil {
			return err
		}
	}
	c.recs = append(c.recs, batch...)
	return nil
}

func (c *collector) records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...)
}

func (c *collector) messages() []string {
	var m []string
	for _, r := range c.records() {
		m = append(m, r.Message)
	}
	return m
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

type harness struct {
	t      *testing.T
	tl     *Tailer
	c      *collector
	log    *syncBuffer
	loops  atomic.Int64
	cancel context.CancelFunc
	done   chan error
}

// testOptions are fast defaults for tests.
func testOptions(files ...FileConfig) Options {
	return Options{
		Files:        files,
		Host:         "test-host",
		PollInterval: 10 * time.Millisecond,
		RotateWait:   150 * time.Millisecond,
	}
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, c: &collector{}, log: &syncBuffer{}}
	opts.Logger = slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tl, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tl.afterLoop = func() { h.loops.Add(1) }
	h.tl = tl
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("tailer log:\n%s", h.log.String())
		}
	})
	return h
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.tl.Run(ctx, h.c.out) }()
}

// stop cancels Run and returns its result.
func (h *harness) stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return after cancel")
		return nil
	}
}

// wait waits for Run to return by itself.
func (h *harness) wait() error {
	select {
	case err := <-h.done:
		h.cancel()
		h.cancel = nil
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return")
		return nil
	}
}

// waitLoops waits until Run has gone through n more passes of its loop,
// which includes at least n/2 scans and reads of every file.
func (h *harness) waitLoops(n int64) {
	h.t.Helper()
	target := h.loops.Load() + n
	testutil.Until(h.t, 15*time.Second, fmt.Sprintf("%d loops", n), func() bool { return h.loops.Load() >= target })
}

func (h *harness) waitRecords(n int) {
	h.t.Helper()
	testutil.Until(h.t, 15*time.Second, fmt.Sprintf("%d records", n), func() bool { return h.c.len() >= n })
}

func appendFile(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func lines(format string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return b.String()
}

func wantMessages(t *testing.T, got []string, format string, from, to int) {
	t.Helper()
	var want []string
	for i := from; i < to; i++ {
		want = append(want, fmt.Sprintf(format, i))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %d messages, want %d (%q..%q)\ngot:  %q", len(got), len(want), want[0], want[len(want)-1], abbreviate(got))
	}
}

func abbreviate(s []string) []string {
	if len(s) <= 20 {
		return s
	}
	return append(append(append([]string(nil), s[:10]...), "..."), s[len(s)-10:]...)
}

func TestFollowAppends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "old line that existed before\n")
	h := newHarness(t, testOptions(FileConfig{Path: path, App: "myapp", Format: FormatPlain}))
	h.start()
	h.waitLoops(4)
	appendFile(t, path, "first\nsecond\n")
	appendFile(t, path, lines("line %d", 0, 5))
	h.waitRecords(7)
	h.waitLoops(4)
	recs := h.c.records()
	got := h.c.messages()
	want := append([]string{"first", "second"}, strings.Split(strings.TrimSpace(lines("line %d", 0, 5)), "\n")...)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("messages = %q, want %q", got, want)
	}
	off := int64(len("old line that existed before\n"))
	for i, r := range recs {
		if r.Offset != off {
			t.Errorf("record %d offset = %d, want %d", i, r.Offset, off)
		}
		off += int64(len(r.Message) + 1)
		if r.File != path || r.Host != "test-host" || r.App != "myapp" || r.FileID == "" || r.Time.IsZero() {
			t.Errorf("record %d = %+v", i, r)
		}
	}
}

// TestRotationRenameCreate rotates the file the way logrotate does by
// default while lines are written: rename, the writer goes on writing to
// the renamed file for a little while, then reopens the path.
func TestRotationRenameCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	opts := testOptions(FileConfig{Path: path, Format: FormatPlain})
	opts.BatchSize = 64
	h := newHarness(t, opts)
	h.start() // before the file exists: it is read from its beginning
	h.waitLoops(2)

	const total, perFile = 6000, 1000
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rotations := 0
	for i := 0; i < total; i++ {
		if i > 0 && i%perFile == 0 {
			// Polling cannot see a file that lives shorter than a poll
			// interval; real rotations are minutes apart.
			testutil.Until(t, 15*time.Second, "the tailer to follow the new file", func() bool {
				return strings.Count(h.log.String(), "following log file") == rotations+1
			})
			rotations++
			if err := os.Rename(path, fmt.Sprintf("%s.%d", path, rotations)); err != nil {
				t.Fatal(err)
			}
			// Late writes to the old file, before the writer reopens.
			for k := 0; k < 3; k++ {
				fmt.Fprintf(f, "line %06d\n", i)
				i++
			}
			f.Close()
			if f, err = os.Create(path); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(f, "line %06d\n", i)
		if i%200 == 0 {
			time.Sleep(time.Millisecond) // let the tailer interleave with the writer
		}
	}
	f.Close()
	h.waitRecords(total)
	h.waitLoops(10)
	seen := make(map[string]int)
	lastByFile := make(map[string]string)
	ids := make(map[string]bool)
	for _, r := range h.c.records() {
		seen[r.Message]++
		if r.Message <= lastByFile[r.FileID] {
			t.Fatalf("out of order in file %s: %q after %q", r.FileID, r.Message, lastByFile[r.FileID])
		}
		lastByFile[r.FileID] = r.Message
		ids[r.FileID] = true
		if r.File != path {
			t.Fatalf("record File = %q", r.File)
		}
	}
	for i := 0; i < total; i++ {
		if n := seen[fmt.Sprintf("line %06d", i)]; n != 1 {
			t.Fatalf("line %d delivered %d times", i, n)
		}
	}
	if len(seen) != total || h.c.len() != total {
		t.Fatalf("%d records, %d distinct, want %d", h.c.len(), len(seen), total)
	}
	if len(ids) != rotations+1 {
		t.Fatalf("records from %d files, want %d", len(ids), rotations+1)
	}
	// Rotated files are closed after RotateWait and leave the state.
	testutil.Until(t, 15*time.Second, "rotated files closed", func() bool { return strings.Count(h.log.String(), "finished reading rotated") == rotations })
}

func TestCopyTruncate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "")
	h := newHarness(t, testOptions(FileConfig{Path: path, Format: FormatPlain}))
	h.start()
	h.waitLoops(2)

	appendFile(t, path, lines("old-%03d", 0, 100)) // 800 bytes
	h.waitRecords(100)
	// copytruncate: the copy is not watched; the file shrinks.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, lines("mid-%03d", 0, 10))
	h.waitRecords(110)

	// Truncate and at once write past the old position: the size never
	// looks smaller, but the byte before the read position changed.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(lines("new-line-%04d", 0, 100)); err != nil { // 1400 bytes
		t.Fatal(err)
	}
	f.Close()
	h.waitRecords(210)
	h.waitLoops(6)
	got := h.c.messages()
	if len(got) != 210 {
		t.Fatalf("%d records, want 210", len(got))
	}
	wantMessages(t, got[:100], "old-%03d", 0, 100)
	wantMessages(t, got[100:110], "mid-%03d", 0, 10)
	wantMessages(t, got[110:], "new-line-%04d", 0, 100)
	for i, r := range h.c.records()[100:110] {
		if want := int64(i * 8); r.Offset != want {
			t.Fatalf("record %d after truncation: offset %d, want %d", i, r.Offset, want)
		}
	}
	if n := strings.Count(h.log.String(), "reading it again from the start"); n != 2 {
		t.Fatalf("%d truncation log lines, want 2:\n%s", n, h.log.String())
	}
}

func TestPartialLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "")
	h := newHarness(t, testOptions(FileConfig{Path: path, Format: FormatPlain}))
	h.start()
	h.waitLoops(2)

	appendFile(t, path, "hello ")
	h.waitLoops(6)
	if n := h.c.len(); n != 0 {
		t.Fatalf("%d records for a partial line", n)
	}
	appendFile(t, path, "world\r\nsecond")
	h.waitRecords(1)
	h.waitLoops(6)
	if got := h.c.messages(); len(got) != 1 || got[0] != "hello world" {
		t.Fatalf("messages = %q", got)
	}
	// The writer never finishes "second": once the file is rotated away
	// and idle for RotateWait, the partial line is delivered.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "new file\n")
	h.waitRecords(3)
	// "second" comes last: it is held for RotateWait in case the writer
	// still completes it.
	recs := h.c.records()
	if recs[1].Message != "new file" || recs[1].Offset != 0 || recs[2].Message != "second" || recs[2].Offset != int64(len("hello world\r\n")) {
		t.Fatalf("records = %+v", recs)
	}
}

func readState(t *testing.T, path string) map[string]*stateEntry {
	t.Helper()
	m, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	stateFile := filepath.Join(dir, "state", "offsets.json")
	appendFile(t, path, "")
	opts := testOptions(FileConfig{Path: path, Format: FormatPlain})
	opts.StateFile = stateFile
	opts.BatchSize = 10

	// 1: deliver 0..29, then out fails on the batch with line 30.
	h := newHarness(t, opts)
	failed := 0
	h.c.fail = func(batch []Record) error {
		for _, r := range batch {
			if r.Message == "line 30" {
				failed++
				return errors.New("spool full")
			}
		}
		return nil
	}
	h.start()
	h.waitLoops(2)
	appendFile(t, path, lines("line %d", 0, 50))
	err := h.wait()
	if err == nil || !strings.Contains(err.Error(), "spool full") {
		t.Fatalf("Run = %v, want the out error", err)
	}
	wantMessages(t, h.c.messages(), "line %d", 0, 30)
	st := readState(t, stateFile)
	if len(st) != 1 {
		t.Fatalf("state = %v", st)
	}
	for _, e := range st {
		if want := int64(len(lines("line %d", 0, 30))); e.Offset != want || e.Path != path {
			t.Fatalf("saved %+v, want offset %d", e, want)
		}
	}

	// 2: a new Tailer re-delivers from line 30; more lines come while it
	// runs; a clean stop saves everything.
	h2 := newHarness(t, opts)
	h2.start()
	h2.waitRecords(20)
	appendFile(t, path, lines("line %d", 50, 60))
	h2.waitRecords(30)
	h2.waitLoops(4)
	if err := h2.stop(); err != nil {
		t.Fatal(err)
	}
	wantMessages(t, h2.c.messages(), "line %d", 30, 60)

	// 3: while stopped, more lines, then a rotation with more lines in
	// the new file. The rotated file is found by inode and read first.
	appendFile(t, path, lines("line %d", 60, 70))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, lines("line %d", 70, 80))
	h3 := newHarness(t, opts)
	h3.start()
	h3.waitRecords(20)
	h3.waitLoops(4)
	if err := h3.stop(); err != nil {
		t.Fatal(err)
	}
	wantMessages(t, h3.c.messages(), "line %d", 60, 80)
	if !strings.Contains(h3.log.String(), "rotated while the tailer was stopped") {
		t.Fatalf("log: %s", h3.log.String())
	}
	if failed != 1 {
		t.Fatalf("out failed %d times", failed)
	}
}

// TestRunAgainAfterError: the same Tailer, without a state file, delivers
// the failed batch again on the next Run.
func TestRunAgainAfterError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "")
	h := newHarness(t, testOptions(FileConfig{Path: path, Format: FormatPlain}))
	var fail atomic.Bool
	fail.Store(true)
	h.c.fail = func([]Record) error {
		if fail.Load() {
			return errors.New("not now")
		}
		return nil
	}
	h.start()
	h.waitLoops(2)
	appendFile(t, path, lines("line %d", 0, 5))
	if err := h.wait(); err == nil {
		t.Fatal("Run returned nil")
	}
	fail.Store(false)
	h.start()
	h.waitRecords(5)
	appendFile(t, path, lines("line %d", 5, 7))
	h.waitRecords(7)
	h.waitLoops(4)
	wantMessages(t, h.c.messages(), "line %d", 0, 7)
}

func TestStartPositions(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.log")
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %07d %s\n", i, strings.Repeat("x", i%97))
	}
	content := b.String()
	appendFile(t, big, content)
	// The last line is being written when the tailer starts.
	end := filepath.Join(dir, "end.log")
	appendFile(t, end, "complete\nhalf of a li")

	const limit = 10000
	h := newHarness(t, testOptions(
		FileConfig{Path: big, Format: FormatPlain, StartAt: StartAtBeginning, MaxInitialBytes: limit},
		FileConfig{Path: end, Format: FormatPlain},
	))
	h.start()
	// The first line inside the last 10000 bytes, to the last line.
	start := len(content) - limit
	start += strings.IndexByte(content[start-1:], '\n')
	want := strings.Split(strings.TrimSuffix(content[start:], "\n"), "\n")
	h.waitRecords(len(want))
	appendFile(t, end, "ne\nnext\n")
	h.waitRecords(len(want) + 1)
	h.waitLoops(4)
	recs := h.c.records()
	if len(recs) != len(want)+1 {
		t.Fatalf("%d records, want %d", len(recs), len(want)+1)
	}
	if recs[0].Offset != int64(start) || recs[0].Message != want[0] {
		t.Fatalf("first record %q at %d, want %q at %d", recs[0].Message, recs[0].Offset, want[0], start)
	}
	for i, w := range want {
		if recs[i].Message != w {
			t.Fatalf("record %d = %q, want %q", i, recs[i].Message, w)
		}
	}
	if last := recs[len(recs)-1]; last.Message != "next" || last.File != end {
		t.Fatalf("end.log gave %+v, want only \"next\"", last)
	}
}

func TestLongLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "")
	h := newHarness(t, testOptions(FileConfig{Path: path, Format: FormatAuto}))
	const size = 5 << 20
	long := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	h.start()
	h.waitLoops(2)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("start\n")
	// In pieces, so that the tailer sees the line grow.
	for i := 0; i < len(long); i += 1 << 20 {
		if _, err := f.Write(long[i : i+1<<20]); err != nil {
			t.Fatal(err)
		}
		h.waitLoops(2)
	}
	f.WriteString("\nafter\n")
	f.Close()
	h.waitRecords(3)
	h.waitLoops(4)
	runtime.ReadMemStats(&after)

	recs := h.c.records()
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	if r := recs[1]; !r.Truncated || len(r.Message) != DefaultMaxLineBytes || r.Offset != 6 || r.Message[:16] != "0123456789abcdef" {
		t.Fatalf("long line: truncated=%v len=%d offset=%d", r.Truncated, len(r.Message), r.Offset)
	}
	if r := recs[2]; r.Message != "after" || r.Truncated || r.Offset != 6+size+1 {
		t.Fatalf("line after the long one: %+v", r)
	}
	// The line is never held whole: everything the tailer allocated while
	// reading 5 MiB stays well under it.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/2 {
		t.Fatalf("allocated %d bytes reading a %d-byte line", alloc, size)
	}
	t.Logf("allocated %d KiB while reading a %d MiB line", (after.TotalAlloc-before.TotalAlloc)>>10, size>>20)
}

func TestInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "")
	opts := testOptions(FileConfig{Path: path, Format: FormatAuto})
	opts.MaxLineBytes = 20
	h := newHarness(t, opts)
	h.start()
	h.waitLoops(2)
	appendFile(t, path, "bad \xff\xfe x\n{\"msg\":\"j\xc3\x28\"}\n"+"0123456789012345678\xc3\xa9zz\n")
	h.waitRecords(3)
	recs := h.c.records()
	for _, r := range recs {
		if !utf8.ValidString(r.Message) {
			t.Fatalf("invalid UTF-8 in %q", r.Message)
		}
		for k, v := range r.Fields {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("invalid UTF-8 in field %q=%q", k, v)
			}
		}
	}
	if recs[0].Message != "bad \uFFFD x" {
		t.Errorf("message 0 = %q", recs[0].Message)
	}
	if recs[1].Message != "j\uFFFD(" {
		t.Errorf("message 1 = %q", recs[1].Message)
	}
	// Cut at 20 bytes would split é: the half character is dropped.
	if !recs[2].Truncated || recs[2].Message != "0123456789012345678" {
		t.Errorf("message 2 = %q truncated=%v", recs[2].Message, recs[2].Truncated)
	}
}

func TestGlobAndLifecycle(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.log")
	appendFile(t, a, "a-before\n")
	appendFile(t, filepath.Join(dir, "ignored.txt"), "no\n")
	h := newHarness(t, testOptions(FileConfig{Path: filepath.Join(dir, "*.log"), Format: FormatPlain}))
	h.start()
	h.waitLoops(2)
	appendFile(t, a, "a-1\n")
	h.waitRecords(1)
	// A new file matching the glob is read from its beginning.
	b := filepath.Join(dir, "b.log")
	appendFile(t, b, "b-1\nb-2\n")
	h.waitRecords(3)
	// A deleted file is closed after RotateWait and leaves the state.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 15*time.Second, "deleted file closed", func() bool { return strings.Contains(h.log.String(), "finished reading rotated or removed") })
	// A file that comes back is new.
	appendFile(t, a, "a-again\n")
	h.waitRecords(4)
	h.waitLoops(4)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(h.c.messages(), ",")
	if got != "a-1,b-1,b-2,a-again" {
		t.Fatalf("messages = %s", got)
	}
	if n := len(h.tl.state); n != 2 {
		t.Fatalf("%d state entries, want 2 (a.log again, b.log)", n)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	for name, opts := range map[string]Options{
		"no files":      {},
		"empty path":    {Files: []FileConfig{{}}},
		"bad glob":      {Files: []FileConfig{{Path: "/var/log/[a.log"}}},
		"bad format":    {Files: []FileConfig{{Path: "/x", Format: "xml"}}},
		"bad start":     {Files: []FileConfig{{Path: "/x", StartAt: "middle"}}},
		"corrupt state": {Files: []FileConfig{{Path: "/x"}}, StateFile: bad},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "corrupt state" && !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
}

func TestStateFileFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendFile(t, path, "")
	opts := testOptions(FileConfig{Path: path})
	opts.StateFile = filepath.Join(dir, "offsets.json")
	h := newHarness(t, opts)
	h.start()
	h.waitLoops(2)
	appendFile(t, path, strings.Repeat("x", 300)+"\n")
	h.waitRecords(1)
	h.waitLoops(2)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(opts.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int
		Files   []map[string]any
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 1 || len(doc.Files) != 1 || doc.Files[0]["offset"] != 301.0 || doc.Files[0]["fp_len"] != 256.0 {
		t.Fatalf("state file:\n%s", data)
	}
	if _, err := os.Stat(opts.StateFile + ".tmp"); err == nil {
		t.Fatal("temporary state file left behind")
	}
	// Another file now has the same inode number (simulated by changing
	// the fingerprint): it is read from its start, not at the old offset.
	os.WriteFile(path, []byte(strings.Repeat("y", 400)+"\n"), 0o644)
	h2 := newHarness(t, opts)
	h2.start()
	h2.waitRecords(1)
	if r := h2.c.records()[0]; r.Offset != 0 || !strings.HasPrefix(r.Message, "yyy") {
		t.Fatalf("record %+v", r)
	}
}

// BenchmarkTail measures lines per second from a file through parsing to
// the callback.
func BenchmarkTail(b *testing.B) {
	// Recent timestamps: old ones would be replaced (and kept in Fields).
	base := time.Now().Add(-time.Hour).UTC()
	ts := func(i int, layout string) string { return base.Add(time.Duration(i) * time.Microsecond).Format(layout) }
	gen := map[string]func(i int) string{
		"json": func(i int) string {
			return fmt.Sprintf(`{"time":"%s","level":"INFO","msg":"request served","method":"GET","path":"/api/v1/items/%d","status":200,"duration_ms":%d,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`, ts(i, time.RFC3339Nano), i, i%300)
		},
		"logfmt": func(i int) string {
			return fmt.Sprintf(`time=%s level=INFO msg="request served" method=GET path=/api/v1/items/%d status=200 duration=%dms`, ts(i, "2006-01-02T15:04:05.000000Z07:00"), i, i%300)
		},
		"plain": func(i int) string {
			return fmt.Sprintf(`%s INFO [worker-%d] c.e.app.OrderService - order %d processed in %d ms`, ts(i, "2006-01-02 15:04:05.000"), i%8, i, i%300)
		},
	}
	for _, name := range []string{"json", "logfmt", "plain"} {
		b.Run(name, func(b *testing.B) {
			const n = 200_000
			path := filepath.Join(b.TempDir(), "bench.log")
			var sb strings.Builder
			for i := 0; i < n; i++ {
				sb.WriteString(gen[name](i))
				sb.WriteByte('\n')
			}
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(sb.Len()))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tl, err := New(Options{
					Files: []FileConfig{{Path: path, StartAt: StartAtBeginning, MaxInitialBytes: -1}},
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				got := 0
				err = tl.Run(ctx, func(batch []Record) error {
					got += len(batch)
					if got >= n {
						cancel()
					}
					return nil
				})
				cancel()
				if err != nil || got != n {
					b.Fatalf("Run = %v after %d records", err, got)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
