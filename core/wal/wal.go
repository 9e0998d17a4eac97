// Package wal is a write-ahead log of opaque records: segment files in one
// directory, each record checksummed, appended with group commit (concurrent
// Appends share one fsync) and acknowledged only once on disk.
//
// The cluster writes telemetry (samples, log lines, event history) here
// before it hands it to stores that buffer in memory, so that what it
// acknowledged survives a kill; see core/cluster/durable.go for the records.
//
// Life of a segment: records are appended to the active segment; the active
// segment is closed (fsync'd, a new one opened) when it reaches
// Options.SegmentBytes or by Trim once it is older than Options.RotateAfter;
// a closed segment is deleted by Trim Options.Keep after it was closed: by
// then the stores have flushed what it holds (the caller picks Keep from
// the stores' flush guarantees). Segments found at Open belong to the
// previous run: Replay reads them and Replayed hands them to Trim, which
// deletes nothing before.
//
// Format: a segment starts with the 8-byte magic "UNYOWAL1"; each record is
//
//	length  uint32 little endian  length of the payload
//	crc     uint32 little endian  CRC-32C of the 4 length bytes and the payload
//	payload [length]byte
//
// A record that is cut short (a torn write) or whose checksum does not match
// ends its segment at replay: the rest of that segment is dropped with a log
// line naming the file and offset, and replay goes on with the next segment.
package wal

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/internal/datasync"
)

const (
	magic     = "UNYOWAL1"
	headerLen = 8
	suffix    = ".wal"
	// MaxRecordBytes bounds one record, so that a corrupt length cannot
	// make replay allocate gigabytes.
	MaxRecordBytes = 256 << 20
)

// ErrFull is returned by Append when the log holds Options.MaxBytes: the
// stores behind it are not keeping up (or are down). Callers refuse the
// write with a retryable error; the sender keeps the data and retries.
var ErrFull = errors.New("write-ahead log full")

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("write-ahead log closed")

// Options configure a WAL.
type Options struct {
	// Dir holds the segment files; it is created if missing. Required.
	Dir string
	// MaxBytes bounds the size of all segments together; Append fails with
	// ErrFull beyond it. Default 1 GiB.
	MaxBytes int64
	// SegmentBytes closes the active segment once it reaches this size.
	// Default 64 MiB.
	SegmentBytes int64
	// RotateAfter is how long Trim lets the active segment take records
	// before it closes it. Default 5s.
	RotateAfter time.Duration
	// Keep is how long a closed segment is kept before Trim deletes it.
	// Default 60s.
	Keep time.Duration
	// Logger gets the lines about dropped tails; default slog.Default().
	Logger *slog.Logger
	// Now is the clock of rotation and trimming; default time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		return errors.New("wal: Options.Dir is required")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 30
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.RotateAfter <= 0 {
		o.RotateAfter = 5 * time.Second
	}
	if o.Keep <= 0 {
		o.Keep = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// segment is one file of the log.
type segment struct {
	seq    uint64
	path   string
	size   int64
	closed time.Time // zero while active, or while it awaits replay
}

// WAL is a write-ahead log. It is safe for concurrent use.
type WAL struct {
	opts Options

	// syncMu serialises fsyncs and rotations; it is taken before mu.
	syncMu sync.Mutex
	synced uint64 // logical position known to be on disk

	mu       sync.Mutex
	f        *os.File // the active segment
	active   *segment
	opened   time.Time // when the active segment was opened
	segments []*segment
	total    int64  // bytes of all segments
	pos      uint64 // logical position: bytes appended since Open
	old      []*segment
	closed   bool
	buf      []byte
}

// Open opens the log in opts.Dir. Segments already there are kept for
// Replay; appends go to a new segment.
func Open(opts Options) (*WAL, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", opts.Dir, err)
	}
	w := &WAL{opts: opts}
	names, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", opts.Dir, err)
	}
	var next uint64
	for _, e := range names {
		seq, ok := parseName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
		s := &segment{seq: seq, path: filepath.Join(opts.Dir, e.Name()), size: info.Size()}
		w.old = append(w.old, s)
		w.total += s.size
		next = max(next, seq+1)
	}
	slices.SortFunc(w.old, func(a, b *segment) int { return cmp.Compare(a.seq, b.seq) })
	w.segments = slices.Clone(w.old)
	if err := w.openSegment(next); err != nil {
		return nil, err
	}
	return w, nil
}

func segmentName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, suffix) }

func parseName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(base, 10, 64)
	return seq, err == nil
}

// openSegment makes seq the active segment; mu must be held (or w unshared).
func (w *WAL) openSegment(seq uint64) error {
	path := filepath.Join(w.opts.Dir, segmentName(seq))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("wal: create segment: %w", err)
	}
	if _, err := f.WriteString(magic); err != nil {
		f.Close()
		return fmt.Errorf("wal: write %s: %w", path, err)
	}
	// The magic and the directory entry are made durable with the first
	// record's fsync (Sync covers the file; the directory is synced here
	// once, so the file cannot vanish after a crash).
	if err := syncDir(w.opts.Dir); err != nil {
		f.Close()
		return err
	}
	s := &segment{seq: seq, path: path, size: headerLen}
	w.f, w.active, w.opened = f, s, w.opts.Now()
	w.segments = append(w.segments, s)
	w.total += headerLen
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: sync %s: %w", dir, err)
	}
	return nil
}

// Append writes rec and returns once it is on disk. Appends running at the
// same time share one fsync.
func (w *WAL) Append(ctx context.Context, rec []byte) error {
	if len(rec) > MaxRecordBytes {
		return fmt.Errorf("wal: record of %d bytes exceeds the limit of %d", len(rec), MaxRecordBytes)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	need := int64(8 + len(rec))
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if w.total+need > w.opts.MaxBytes {
		total := w.total
		w.mu.Unlock()
		return fmt.Errorf("%w: %d of %d bytes in %s hold telemetry the stores have not yet flushed", ErrFull, total, w.opts.MaxBytes, w.opts.Dir)
	}
	if w.active.size+need > w.opts.SegmentBytes && w.active.size > headerLen {
		w.mu.Unlock()
		if err := w.rotate(false); err != nil {
			return err
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return ErrClosed
		}
	}
	w.buf = binary.LittleEndian.AppendUint32(w.buf[:0], uint32(len(rec)))
	crc := crc32.Update(0, castagnoli, w.buf[:4])
	w.buf = binary.LittleEndian.AppendUint32(w.buf, crc32.Update(crc, castagnoli, rec))
	w.buf = append(w.buf, rec...)
	if _, err := w.f.Write(w.buf); err != nil {
		// The segment may now hold a partial record; replay drops it as a
		// torn tail. Start a fresh segment so later records stay readable.
		w.mu.Unlock()
		_ = w.rotate(true)
		return fmt.Errorf("wal: write %s: %w", w.active.path, err)
	}
	w.active.size += need
	w.total += need
	w.pos += uint64(need)
	target := w.pos
	w.mu.Unlock()
	return w.sync(target)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sync returns once the log is on disk up to target: the first caller
// fsyncs everything written so far, those queued behind it find their
// records already covered. That is the group commit.
func (w *WAL) sync(target uint64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.synced >= target {
		return nil
	}
	w.mu.Lock()
	f, upto := w.f, w.pos
	w.mu.Unlock()
	if err := datasync.File(f); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	w.synced = upto
	return nil
}

// rotate closes the active segment (fsync'd) and opens the next one.
// Unless force, an empty active segment is kept.
func (w *WAL) rotate(force bool) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || (!force && w.active.size <= headerLen) {
		return nil
	}
	if err := datasync.File(w.f); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", w.active.path, err)
	}
	w.synced = w.pos
	w.active.closed = w.opts.Now()
	return w.openSegment(w.active.seq + 1)
}

// Replay calls fn with every record of the segments found at Open, oldest
// first, skipping torn or corrupt tails (logged with file and offset). An
// error from fn stops the replay and is returned; Replay may be called
// again.
func (w *WAL) Replay(fn func(rec []byte) error) error {
	w.mu.Lock()
	old := slices.Clone(w.old)
	w.mu.Unlock()
	for _, s := range old {
		if err := replaySegment(s.path, w.opts.Logger, fn); err != nil {
			return err
		}
	}
	return nil
}

// Replayed tells the log that the segments found at Open are in the stores
// now: Trim deletes them Keep later, like segments closed now.
func (w *WAL) Replayed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.opts.Now()
	for _, s := range w.old {
		s.closed = now
	}
	w.old = nil
}

func replaySegment(path string, log *slog.Logger, fn func([]byte) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("wal: read %s: %w", path, err)
	}
	off, n := 0, len(data)
	if n < headerLen || string(data[:headerLen]) != magic {
		if n > 0 {
			log.Warn("telemetry WAL: segment without a valid header; dropped", "file", path, "offset", 0, "bytes", n)
		}
		return nil
	}
	off = headerLen
	for off < n {
		why := ""
		var rec []byte
		switch {
		case n-off < 8:
			why = "torn record header"
		default:
			l := binary.LittleEndian.Uint32(data[off:])
			sum := binary.LittleEndian.Uint32(data[off+4:])
			switch {
			case l > MaxRecordBytes:
				why = "record length out of range"
			case n-off-8 < int(l):
				why = "torn record"
			default:
				rec = data[off+8 : off+8+int(l)]
				if crc32.Update(crc32.Update(0, castagnoli, data[off:off+4]), castagnoli, rec) != sum {
					why = "checksum mismatch"
				}
			}
		}
		if why != "" {
			log.Warn("telemetry WAL: dropping the tail of a segment", "file", path, "offset", off, "bytes", n-off, "why", why)
			return nil
		}
		if err := fn(rec); err != nil {
			return err
		}
		off += 8 + len(rec)
	}
	return nil
}

// Trim closes the active segment if it has taken records for longer than
// RotateAfter, and deletes the closed segments older than Keep, once the
// segments found at Open are replayed.
func (w *WAL) Trim() error {
	now := w.opts.Now()
	w.mu.Lock()
	rotate := w.active.size > headerLen && now.Sub(w.opened) >= w.opts.RotateAfter
	w.mu.Unlock()
	if rotate {
		if err := w.rotate(false); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.old) > 0 {
		// Until the previous run's segments are replayed, every segment
		// stays: later ones may hold what replay needs (marks of records
		// not to replay), and the bound turns writers away meanwhile.
		return nil
	}
	var errs []error
	kept := w.segments[:0]
	removed := false
	for _, s := range w.segments {
		if s == w.active || s.closed.IsZero() || now.Sub(s.closed) < w.opts.Keep {
			kept = append(kept, s)
			continue
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("wal: delete %s: %w", s.path, err))
			kept = append(kept, s)
			continue
		}
		w.total -= s.size
		removed = true
	}
	clear(w.segments[len(kept):])
	w.segments = kept
	if removed {
		errs = append(errs, syncDir(w.opts.Dir))
	}
	return errors.Join(errs...)
}

// Stats describes the log for status pages and tests.
type Stats struct {
	Segments int
	Bytes    int64
	MaxBytes int64
}

// Stats returns the log's current size.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Segments: len(w.segments), Bytes: w.total, MaxBytes: w.opts.MaxBytes}
}

// Close syncs and closes the active segment. Segments stay on disk for the
// next Open's Replay.
func (w *WAL) Close() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := datasync.File(w.f)
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

var _ io.Closer = (*WAL)(nil)
