// Package spool is a durable, ordered, on-disk FIFO queue of opaque records.
//
// The agent appends everything it sends to its cluster to a spool first. A
// sender goroutine waits for records, peeks at the oldest ones in batches,
// sends them and acknowledges them once the cluster confirmed. Records survive
// restarts and cluster outages and are replayed in order; delivery is
// at-least-once (a crash between send and Ack resends the batch), so the
// receiver deduplicates by an idempotency key inside the record.
//
// Records live in append-only segment files. Acknowledging moves a persisted
// read position and deletes fully acknowledged segments. When the spool
// exceeds Options.MaxBytes, the oldest whole segments are dropped so that the
// producer never blocks and the newest records are kept.
//
// One producer and one consumer may use a Spool concurrently; several
// producers (or consumers) are serialized.
package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unyo-ops/unyo/core/internal/private"
)

const (
	// DefaultSegmentBytes is the segment size used when Options.SegmentBytes is 0
	// (reduced to MaxBytes/4 when MaxBytes is small).
	DefaultSegmentBytes = 8 << 20
	// DefaultMaxBytes is the spool size limit used when Options.MaxBytes is 0.
	DefaultMaxBytes = 256 << 20
	// DefaultSyncInterval is the fsync period of SyncPeriodic when
	// Options.SyncInterval is 0.
	DefaultSyncInterval = 200 * time.Millisecond
	// MaxRecordBytes is the largest record payload Append accepts.
	MaxRecordBytes = 16 << 20

	minSegmentBytes = 256
)

var (
	// ErrClosed is returned by operations on a closed Spool.
	ErrClosed = errors.New("spool is closed")
	// ErrRecordTooLarge is returned (wrapped) by Append for a record over MaxRecordBytes.
	ErrRecordTooLarge = errors.New("record too large")
	// ErrAckOrder is returned (wrapped) by Ack for a batch that is not the
	// oldest unacknowledged one.
	ErrAckOrder = errors.New("batch is not the oldest unacknowledged batch")
	// ErrLocked is returned (wrapped) by Open when another Spool, in this or
	// another process, has the directory open.
	ErrLocked = errors.New("spool directory is in use")
)

// SyncPolicy says when appended records are forced to stable storage.
type SyncPolicy int

const (
	// SyncAlways fsyncs before Append returns: an appended record survives a
	// machine crash. One fsync per Append call, so batch records when the
	// rate is high.
	SyncAlways SyncPolicy = iota
	// SyncPeriodic fsyncs in the background every Options.SyncInterval:
	// a machine crash may lose that much of the newest records.
	SyncPeriodic
	// SyncNever leaves flushing to the operating system. Records survive a
	// crash of the process but not necessarily of the machine.
	SyncNever
)

func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncPeriodic:
		return "periodic"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// Options configure a Spool. Only Dir is required.
type Options struct {
	// Dir holds the spool's files; it is created if missing.
	Dir string
	// SegmentBytes is the size at which a segment file is closed and a new
	// one started (a larger single record gets a segment of its own).
	// Space is reclaimed and dropped in whole segments.
	SegmentBytes int64
	// MaxBytes bounds the spool's size on disk. When an Append exceeds it,
	// the oldest segments are dropped even if unacknowledged; the newest
	// (active) segment is never dropped, so the spool may exceed MaxBytes by
	// up to one segment.
	MaxBytes int64
	// Sync chooses the durability of Append; the zero value is SyncAlways.
	Sync SyncPolicy
	// SyncInterval is the fsync period of SyncPeriodic.
	SyncInterval time.Duration
	// LazyAcks leaves the read position that Ack writes to the operating
	// system even under SyncAlways: a machine crash may then forget the
	// latest acknowledgements and deliver those records again, which an
	// at-least-once consumer takes anyway. Appends keep their Sync policy.
	LazyAcks bool
	// Logger receives warnings about dropped and corrupt data; nil means slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("open spool: Options.Dir is empty")
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = min(DefaultSegmentBytes, o.MaxBytes/4)
	}
	if o.SegmentBytes < minSegmentBytes {
		return o, fmt.Errorf("open spool %s: SegmentBytes %d is below the minimum of %d", o.Dir, o.SegmentBytes, minSegmentBytes)
	}
	if o.MaxBytes < o.SegmentBytes {
		return o, fmt.Errorf("open spool %s: MaxBytes %d is smaller than SegmentBytes %d", o.Dir, o.MaxBytes, o.SegmentBytes)
	}
	switch o.Sync {
	case SyncAlways, SyncNever:
	case SyncPeriodic:
		if o.SyncInterval <= 0 {
			o.SyncInterval = DefaultSyncInterval
		}
	default:
		return o, fmt.Errorf("open spool %s: unknown sync policy %v", o.Dir, o.Sync)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Stats is a snapshot of a Spool's state. Counters are since Open.
type Stats struct {
	// PendingRecords are appended and neither acknowledged nor dropped.
	PendingRecords int64
	// PendingBytes is the size on disk of the pending records, framing included.
	PendingBytes int64
	// DiskBytes is the total size of the segment files.
	DiskBytes int64
	// Segments is the number of segment files.
	Segments int
	// DroppedRecords and DroppedBytes were removed unacknowledged to stay
	// within MaxBytes.
	DroppedRecords int64
	DroppedBytes   int64
	// Corruptions counts damaged regions found (no record marker, bad CRC,
	// impossible length). Each is skipped up to the next intact record
	// (to the end of its segment in segments of the old format, or if
	// nothing intact follows).
	Corruptions int64
	// SkippedBytes were skipped because of those corruptions.
	SkippedBytes int64
	// TruncatedBytes were cut from the end of the newest segment at Open: an
	// append torn by a crash.
	TruncatedBytes int64
}

// segment is the in-memory view of one segment file.
type segment struct {
	seq  uint64
	size int64 // readable end: the last complete, published record ends here
	disk int64 // file size (larger than size if damaged bytes follow)
	// records counts the records in [segHeaderLen, size) that are readable;
	// known damaged regions are excluded.
	records int64
	fr      framing
	// damaged are the regions known to be damaged, reported once; readers
	// skip them.
	damaged []region
}

// damagedAt returns the known damaged region starting at off.
func (g *segment) damagedAt(off int64) (region, bool) {
	for _, r := range g.damaged {
		if r.at == off {
			return r, true
		}
	}
	return region{}, false
}

// Spool is a durable FIFO queue of records in a directory. Use Open.
type Spool struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File

	// closed is set first thing in Close; operations check it.
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	stopSync  chan struct{}
	syncDone  chan struct{}

	// wmu serializes producers; it guards w.
	wmu sync.Mutex
	w   struct {
		f     *os.File // active (newest) segment, the only one written to
		seq   uint64
		size  int64 // bytes written, including not yet published ones
		dirty bool  // written since the last fsync (SyncPeriodic)
		buf   []byte
		// failAfter and writes drive the spool-append-mid failpoint (a test hook).
		failAfter, writes int64
	}

	// rmu serializes consumers; it guards r.
	rmu sync.Mutex
	r   struct {
		f          *os.File // cached read handle
		seq        uint64
		avg        int      // running estimate of record size, to size read-ahead
		posF       *os.File // position file
		posCounter uint64   // counter of the slot holding the current position
	}

	// mu guards the shared state below. Lock order: wmu or rmu, then mu;
	// file I/O is done outside mu so producers and consumers don't stall
	// each other on fsync.
	mu  sync.Mutex
	pos position
	// consumed is how many of segs[0].records lie before pos.off.
	consumed int64
	// segs are the segment files in order; invariant: segs[0].seq == pos.seq.
	segs         []*segment
	totalRecords int64 // sum of segs[i].records
	diskBytes    int64 // sum of segs[i].disk
	stats        Stats // counters only; the rest is computed in Stats()
	notify       chan struct{}
	notifyArmed  bool // a Wait holds notify: close it on the next publish
}

// Open opens or creates the spool in opts.Dir, recovering from a crash: it
// deletes acknowledged segments, truncates a torn final record and notes
// corrupt ones so that reading skips them.
func Open(opts Options) (*Spool, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// Private, segments included, whatever modes an older version left:
	// results carry check outputs.
	if err := private.Dir(opts.Dir, opts.Logger); err != nil {
		return nil, fmt.Errorf("spool directory: %w", err)
	}
	if err := private.Files(opts.Dir, opts.Logger); err != nil {
		return nil, fmt.Errorf("spool directory: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Spool{
		dir:    opts.Dir,
		opts:   opts,
		log:    opts.Logger.With("component", "spool", "dir", opts.Dir),
		lock:   lock,
		notify: make(chan struct{}),
	}
	s.r.avg = 512
	s.w.failAfter = appendFailpoint()
	if err := s.recover(); err != nil {
		if s.w.f != nil {
			s.w.f.Close()
		}
		if s.r.posF != nil {
			s.r.posF.Close()
		}
		unlockDir(lock)
		return nil, err
	}
	if opts.Sync == SyncPeriodic {
		s.stopSync = make(chan struct{})
		s.syncDone = make(chan struct{})
		go s.syncLoop(opts.SyncInterval)
	}
	return s, nil
}

func (s *Spool) segPath(seq uint64) string { return filepath.Join(s.dir, segName(seq)) }

// recover rebuilds the in-memory state from the directory.
func (s *Spool) recover() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("open spool: list directory: %w", err)
	}
	var seqs []uint64
	for _, e := range entries {
		if seq, ok := parseSegName(e.Name()); ok && e.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	var maxSeq uint64
	if len(seqs) > 0 {
		maxSeq = seqs[len(seqs)-1]
	}
	posF, pos, counter, havePos, corrupt, err := readPosition(s.dir)
	if err != nil {
		return err
	}
	s.r.posF, s.r.posCounter = posF, counter
	if corrupt {
		s.log.Warn("spool position file is corrupt; replaying all records on disk, the cluster will see duplicates",
			"file", posF.Name())
	}
	if havePos {
		// Segments before the position's are fully acknowledged; a crash
		// may have stopped Ack between persisting the position and deleting them.
		for len(seqs) > 0 && seqs[0] < pos.seq {
			if err := os.Remove(s.segPath(seqs[0])); err != nil {
				return fmt.Errorf("open spool: remove acknowledged segment: %w", err)
			}
			seqs = seqs[1:]
		}
		if len(seqs) > 0 && seqs[0] != pos.seq {
			// The position's segment was dropped for space (drops don't
			// rewrite the position file): start at the oldest remaining one.
			pos = position{seq: seqs[0], off: segHeaderLen}
		}
	}
	if len(seqs) == 0 {
		next := max(maxSeq+1, pos.seq, 1)
		f, err := s.createSegment(next)
		if err != nil {
			return err
		}
		s.w.f, s.w.seq, s.w.size = f, next, segHeaderLen
		s.segs = []*segment{{seq: next, size: segHeaderLen, disk: segHeaderLen, fr: framingV2}}
		s.diskBytes = segHeaderLen
		s.pos = position{seq: next, off: segHeaderLen}
		return syncDir(s.dir, s.opts.Sync)
	}
	if !havePos {
		pos = position{seq: seqs[0], off: segHeaderLen}
	}

	for i, seq := range seqs {
		last := i == len(seqs)-1
		start := int64(segHeaderLen)
		if seq == pos.seq {
			start = pos.off
		}
		seg, f, start, err := s.recoverSegment(seq, start, last)
		if err != nil {
			return err
		}
		if seq == pos.seq {
			pos.off = start
		}
		s.segs = append(s.segs, seg)
		s.totalRecords += seg.records
		s.diskBytes += seg.disk
		if last {
			if f == nil {
				// The newest segment's header is unusable: append to a fresh one.
				if f, err = s.createSegment(seq + 1); err != nil {
					return err
				}
				s.segs = append(s.segs, &segment{seq: seq + 1, size: segHeaderLen, disk: segHeaderLen, fr: framingV2})
				s.diskBytes += segHeaderLen
				if err := syncDir(s.dir, s.opts.Sync); err != nil {
					f.Close()
					return err
				}
				seq = seq + 1
			}
			s.w.f, s.w.seq, s.w.size = f, seq, s.segs[len(s.segs)-1].size
		}
	}
	s.pos = pos
	// Segments read to the end need no longer exist.
	s.mu.Lock()
	gone := s.advanceLocked()
	s.mu.Unlock()
	s.removeSegments(gone)
	return nil
}

// recoverSegment checks one segment file from start on. For the newest
// segment it returns the file opened for appending, or nil if the header is
// unusable; a torn final record is truncated.
// It also returns the offset it scanned from, which is start unless start was invalid.
func (s *Spool) recoverSegment(seq uint64, start int64, last bool) (_ *segment, wf *os.File, from int64, err error) {
	path := s.segPath(seq)
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open spool: %w", err)
	}
	defer func() {
		if !last || wf == nil {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open spool: %w", err)
	}
	size := fi.Size()
	hdr := make([]byte, segHeaderLen)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && n != int(size) {
		return nil, nil, 0, fmt.Errorf("open spool: read segment header: %w", err)
	}
	want := segHeader()
	if size < segHeaderLen && last && string(hdr[:n]) == string(want[:n]) {
		// Crashed while creating the segment: finish the header.
		if _, err := f.WriteAt(want, 0); err != nil {
			return nil, nil, 0, fmt.Errorf("open spool: repair segment header: %w", err)
		}
		return &segment{seq: seq, size: segHeaderLen, disk: segHeaderLen, fr: framingV2}, f, segHeaderLen, nil
	}
	version := segVersion(hdr[:n])
	if version == 0 {
		s.stats.Corruptions++
		s.stats.SkippedBytes += size
		s.log.Warn("spool segment has no valid header; skipping it", "file", path, "bytes", size)
		return &segment{seq: seq, size: segHeaderLen, disk: size, fr: framingV2}, nil, start, nil
	}
	fr := framingOf(version)
	if start < segHeaderLen || start > size {
		s.log.Warn("spool position is outside its segment; replaying the segment from the start",
			"file", path, "offset", start, "size", size)
		start = segHeaderLen
	}
	res, err := scanRecords(f, fr, start, size)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open spool: %w", err)
	}
	seg := &segment{seq: seq, size: res.lastEnd, disk: size, records: res.records, fr: fr, damaged: res.damaged}
	if k := len(seg.damaged) - 1; last && k >= 0 && seg.damaged[k].next == size {
		// Nothing intact follows the damage at the end of the newest
		// segment: an append torn by a crash (those bytes were never
		// acknowledged as durable). Cut it so appends continue cleanly.
		tail := seg.damaged[k]
		seg.damaged = seg.damaged[:k]
		if err := f.Truncate(tail.at); err != nil {
			return nil, nil, 0, fmt.Errorf("open spool: cut the torn record at offset %d of %s: %w", tail.at, path, err)
		}
		if s.opts.Sync != SyncNever {
			if err := f.Sync(); err != nil {
				return nil, nil, 0, fmt.Errorf("open spool: %w", err)
			}
		}
		seg.disk = tail.at
		s.stats.TruncatedBytes += size - tail.at
		s.log.Warn("the previous run ended in the middle of writing to the spool; truncated the incomplete record at the end of the segment",
			"file", path, "offset", tail.at, "bytes", size-tail.at, "found", tail.why.String())
	}
	for _, r := range seg.damaged {
		s.stats.Corruptions++
		s.stats.SkippedBytes += r.next - r.at
		s.logRegion(path, r, size)
	}
	if last && version != formatVersion {
		// Appends use the current format, in a segment of their own.
		return seg, nil, start, nil
	}
	return seg, f, start, nil
}

// logRegion logs a damaged region of the segment at path (of size bytes)
// found for the first time.
func (s *Spool) logRegion(path string, r region, size int64) {
	if r.next < size {
		s.log.Warn("spool segment has a damaged record; skipped it and resumed at the next intact record",
			"file", path, "offset", r.at, "bytes", r.next-r.at, "found", r.why.String(), "resumed_at", r.next)
		return
	}
	s.log.Warn("spool segment has a damaged record and no intact record after it; skipped the rest of the segment",
		"file", path, "offset", r.at, "bytes", r.next-r.at, "found", r.why.String())
}

// createSegment creates segment seq with its header. The caller syncs the
// directory so that the new name survives a crash.
func (s *Spool) createSegment(seq uint64) (*os.File, error) {
	path := s.segPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create spool segment: %w", err)
	}
	if _, err := f.WriteAt(segHeader(), 0); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create spool segment: %w", err)
	}
	return f, nil
}

func syncDir(dir string, p SyncPolicy) error {
	if p == SyncNever {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync spool directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync spool directory: %w", err)
	}
	return nil
}

// advanceLocked moves pos past segments that are read to the end (and are
// not the newest) and unlinks them from segs, returning them for removal.
func (s *Spool) advanceLocked() []*segment {
	var gone []*segment
	for len(s.segs) > 1 && s.pos.off >= s.segs[0].size {
		gone = append(gone, s.segs[0])
		s.dropFrontLocked()
		s.pos = position{seq: s.segs[0].seq, off: segHeaderLen}
		s.consumed = 0
	}
	return gone
}

// dropFrontLocked unlinks segs[0] from the in-memory state.
func (s *Spool) dropFrontLocked() {
	s.totalRecords -= s.segs[0].records
	s.diskBytes -= s.segs[0].disk
	s.segs[0] = nil
	s.segs = s.segs[1:]
}

// removeSegments deletes the files of segments already unlinked from segs.
func (s *Spool) removeSegments(gone []*segment) {
	for _, g := range gone {
		if err := os.Remove(s.segPath(g.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Harmless for correctness: Open deletes segments before the position.
			s.log.Warn("cannot remove spool segment", "err", err)
		}
	}
}

func (s *Spool) segLocked(seq uint64) *segment {
	for _, g := range s.segs {
		if g.seq == seq {
			return g
		}
	}
	return nil
}

// Wait blocks until there is at least one unacknowledged record, ctx is
// done (returning ctx.Err()) or the Spool is closed (ErrClosed). Records that
// were peeked but not acknowledged count as unacknowledged.
func (s *Spool) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.closed.Load() {
			s.mu.Unlock()
			return ErrClosed
		}
		if s.totalRecords-s.consumed > 0 {
			s.mu.Unlock()
			return nil
		}
		ch := s.notify
		s.notifyArmed = true
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// wakeLocked wakes all Waits.
func (s *Spool) wakeLocked() {
	if s.notifyArmed {
		close(s.notify)
		s.notify = make(chan struct{})
		s.notifyArmed = false
	}
}

// Stats returns a snapshot of the spool's state.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.PendingRecords = s.totalRecords - s.consumed
	st.DiskBytes = s.diskBytes
	st.Segments = len(s.segs)
	for i, g := range s.segs {
		from := int64(segHeaderLen)
		if i == 0 {
			from = s.pos.off
		}
		st.PendingBytes += max(g.size-from, 0)
	}
	return st
}

// Close syncs and closes the spool's files. Blocked Waits return ErrClosed.
func (s *Spool) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Spool) close() error {
	s.mu.Lock()
	s.closed.Store(true)
	close(s.notify)
	s.notifyArmed = false
	s.mu.Unlock()
	if s.stopSync != nil {
		close(s.stopSync)
		<-s.syncDone
	}
	var errs []error
	s.wmu.Lock()
	if s.w.f != nil {
		// Sync even under SyncNever: a clean shutdown should not lose records.
		if err := s.w.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("close spool: %w", err))
		}
		if err := s.w.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close spool: %w", err))
		}
		s.w.f = nil
	}
	s.wmu.Unlock()
	s.rmu.Lock()
	s.closeReadHandle()
	if err := s.r.posF.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close spool: %w", err))
	}
	s.rmu.Unlock()
	unlockDir(s.lock)
	return errors.Join(errs...)
}

func (s *Spool) syncLoop(every time.Duration) {
	defer close(s.syncDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopSync:
			return
		case <-t.C:
		}
		s.wmu.Lock()
		f, dirty := s.w.f, s.w.dirty
		s.w.dirty = false
		s.wmu.Unlock()
		if !dirty || f == nil {
			continue
		}
		// fsync without wmu so that appends proceed meanwhile. If rotate
		// closes f concurrently, it has synced f itself.
		if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			s.log.Error("cannot sync spool segment; will retry", "err", err)
			s.wmu.Lock()
			if s.w.f == f {
				s.w.dirty = true
			}
			s.wmu.Unlock()
		}
	}
}
