// Package logtail follows log files and turns their lines into records.
//
// A Tailer watches the configured paths (globs allowed), reads new lines,
// parses them (JSON, logfmt or plain text, guessed per line by default) and
// hands them to a callback in batches. It polls: every PollInterval it
// expands the globs and stats the paths; between polls it reads whatever the
// open files have. Files are identified by device and inode, which is how it
// follows rotation:
//
//   - rename + create (logrotate's default): the old file is read to its end
//     (and for RotateWait after its last write, as a writer may not have
//     reopened yet) before the new file is read from its beginning;
//   - copytruncate or any truncation: when a file becomes shorter than the
//     read position, or the byte before the read position changed, reading
//     starts again at 0;
//   - deleted files are read to their end like rotated ones; paths that do
//     not exist yet are waited for; new files matching a glob are picked up
//     and read from their beginning.
//
// # Delivery guarantee
//
// Delivery is at-least-once with idempotency keys. The offsets of a batch
// are committed only after the callback returned nil for it, and committed
// offsets are written to Options.StateFile at most StateInterval apart and
// when Run returns. A new Tailer (or a new Run) resumes every file exactly at
// its committed offset, so:
//
//   - after Run returned (context cancelled, or the callback failed), nothing
//     is duplicated and nothing is skipped: the batch the callback failed on
//     is delivered again;
//   - after a crash, the batches delivered since the last write of the state
//     file (at most StateInterval) are delivered again. Record.FileID plus
//     Record.Offset identifies a line, so the consumer can drop them.
//
// Lines can be lost only where polling cannot see them: lines written
// between copytruncate's copy and its truncate; a file that was truncated
// and rewritten past the read position with the same byte just before it
// (reading then goes on mid-file); a file that lived less than a
// PollInterval (two rotations within one poll); a rotated file moved out of
// its directory or compressed while the tailer was not running; unread
// lines of a deleted file when Run returns.
package logtail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/unyo-ops/unyo/core/ctxwait"
)

// Record is one log line.
type Record struct {
	Time      time.Time         // parsed from the line, else the time it was read
	Host      string            // Options.Host
	App       string            // FileConfig.App, else from the line
	Level     string            // LevelTrace ... LevelFatal, or "" if unknown
	TraceID   string            // from a trace id field of a structured line
	Message   string            // the message; the rest of a plain line
	Fields    map[string]string // other fields of the line; nil when none
	File      string            // the path the file was found under
	Offset    int64             // byte offset of the line's start in the file
	FileID    string            // "device:inode" of the file; with Offset, the line's identity
	Truncated bool              // the line was longer than MaxLineBytes and was cut
}

// StartAt values of FileConfig.
const (
	StartAtEnd       = "end"       // skip what a file holds when first seen
	StartAtBeginning = "beginning" // read it, at most MaxInitialBytes of it
)

// Defaults for zero fields of Options and FileConfig.
const (
	DefaultMaxLineBytes    = 64 << 10
	DefaultMaxInitialBytes = 1 << 20
	DefaultPollInterval    = 250 * time.Millisecond
	DefaultBatchSize       = 1000
	DefaultRotateWait      = 5 * time.Second
	DefaultStateInterval   = time.Second
)

// readBufferBytes is the size of the one read buffer a Run shares between
// all files; a buffer per file would cost this much per open file.
const readBufferBytes = 128 << 10

// FileConfig says which files to follow and how to read them.
type FileConfig struct {
	// Path is a file path or a filepath.Match glob ("/var/log/app/*.log").
	// A glob may match renamed rotations (app.log.1: same inode, not read
	// twice) but should not match compressed ones (app.log.2.gz) or
	// copytruncate's copies: those are new files and would be read.
	Path string
	// App is the Record.App of the file's lines. When set, an app or
	// service key of a line goes to Fields instead.
	App string
	// Format is FormatAuto (""), FormatJSON, FormatLogfmt or FormatPlain.
	// Lines that do not parse as JSON or logfmt are read as plain text.
	Format string
	// StartAt applies to files that exist when the Tailer first looks and
	// that have no saved offset: StartAtEnd ("", the default) reads only
	// new lines, StartAtBeginning reads the file. Files that appear later
	// are always read from their beginning.
	StartAt string
	// MaxInitialBytes limits StartAtBeginning: reading starts at the first
	// line that begins at most this many bytes before the end. 0 means
	// DefaultMaxInitialBytes, negative means no limit.
	MaxInitialBytes int64
}

// Options configures a Tailer.
type Options struct {
	Files []FileConfig
	// Host is copied to Record.Host.
	Host string
	// StateFile is where committed offsets are kept across restarts. Empty
	// means they are kept only in memory (across Runs of one Tailer).
	StateFile string
	// MaxLineBytes cuts longer lines (Record.Truncated); the rest of such a
	// line is skipped without being held in memory. 0 means
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// PollInterval is how often paths are checked for new, rotated and
	// truncated files and idle files for new data. 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// PollPhase places the checks on the clock: at the instants whose Unix
	// time is PollPhase modulo PollInterval.
	PollPhase time.Duration
	// BatchSize is the most records passed to the callback at once. 0 means
	// DefaultBatchSize.
	BatchSize int
	// RotateWait is how long a rotated or deleted file is kept open after
	// its last new data, for writers that have not reopened their log yet.
	// 0 means DefaultRotateWait.
	RotateWait time.Duration
	// StateInterval is the longest time between writes of StateFile while
	// offsets change; it bounds what a crash re-delivers. 0 means
	// DefaultStateInterval.
	StateInterval time.Duration
	Logger        *slog.Logger
}

// Tailer follows log files. Create it with New and call Run.
type Tailer struct {
	opts Options
	log  *slog.Logger

	running atomic.Bool

	// The fields below belong to the goroutine in Run.

	// state holds the committed offset of every file being followed, by
	// fileID.String(); it survives Runs and is what StateFile stores.
	state    map[string]*stateEntry
	dirty    bool      // state changed since it was written
	lastSave time.Time // last write of StateFile
	started  bool      // the first scan ran: later files are new

	afterLoop func() // tests: called after each pass of Run's loop
}

// New checks opts and reads the saved offsets. A StateFile that exists but
// cannot be read is an error rather than a silent restart from the
// StartAt positions, which would skip or repeat lines.
func New(opts Options) (*Tailer, error) {
	if len(opts.Files) == 0 {
		return nil, errors.New("logtail: no files configured")
	}
	files := make([]FileConfig, len(opts.Files))
	for i, fc := range opts.Files {
		if fc.Path == "" {
			return nil, fmt.Errorf("logtail: files[%d]: empty path", i)
		}
		if _, err := filepath.Match(fc.Path, ""); err != nil {
			return nil, fmt.Errorf("logtail: files[%d]: path %q: %w", i, fc.Path, err)
		}
		abs, err := filepath.Abs(fc.Path)
		if err != nil {
			return nil, fmt.Errorf("logtail: files[%d]: path %q: %w", i, fc.Path, err)
		}
		fc.Path = abs
		switch fc.Format {
		case "":
			fc.Format = FormatAuto
		case FormatAuto, FormatJSON, FormatLogfmt, FormatPlain:
		default:
			return nil, fmt.Errorf("logtail: files[%d] (%s): unknown format %q", i, fc.Path, fc.Format)
		}
		switch fc.StartAt {
		case "":
			fc.StartAt = StartAtEnd
		case StartAtEnd, StartAtBeginning:
		default:
			return nil, fmt.Errorf("logtail: files[%d] (%s): unknown start_at %q", i, fc.Path, fc.StartAt)
		}
		if fc.MaxInitialBytes == 0 {
			fc.MaxInitialBytes = DefaultMaxInitialBytes
		}
		files[i] = fc
	}
	opts.Files = files
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.RotateWait <= 0 {
		opts.RotateWait = DefaultRotateWait
	}
	if opts.StateInterval <= 0 {
		opts.StateInterval = DefaultStateInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StateFile != "" {
		abs, err := filepath.Abs(opts.StateFile)
		if err != nil {
			return nil, fmt.Errorf("logtail: state file %q: %w", opts.StateFile, err)
		}
		opts.StateFile = abs
	}
	state, err := loadState(opts.StateFile)
	if err != nil {
		return nil, fmt.Errorf("logtail: %w", err)
	}
	return &Tailer{opts: opts, log: opts.Logger, state: state}, nil
}

// Run follows the files until ctx is done, calling out with batches of
// records. Records of one file are passed in file order; out must not keep
// the batch slice (its records may be kept). The offsets of a batch are
// committed once out returns nil; if out returns an error, Run saves the
// committed offsets and returns that error, and the next Run starts with the
// same records again.
//
// Run returns nil when ctx is done, after saving the committed offsets. It
// may be called again after it returned, but not concurrently.
func (t *Tailer) Run(ctx context.Context, out func(batch []Record) error) error {
	if !t.running.CompareAndSwap(false, true) {
		return errors.New("logtail: Run is already running")
	}
	defer t.running.Store(false)
	r := &runner{
		t:       t,
		ctx:     ctx,
		out:     out,
		log:     t.log,
		byID:    make(map[fileID]*tailFile),
		buf:     make([]byte, readBufferBytes),
		batch:   make([]Record, 0, t.opts.BatchSize),
		pathErr: make(map[string]string),
	}
	err := r.loop()
	r.closeAll()
	if serr := t.save(); serr != nil {
		if err == nil {
			return serr
		}
		t.log.Error("saving log offsets failed", "err", serr)
	}
	return err
}

// save writes the state file if it changed.
func (t *Tailer) save() error {
	if t.opts.StateFile == "" || !t.dirty {
		return nil
	}
	if err := saveState(t.opts.StateFile, t.state); err != nil {
		return fmt.Errorf("logtail: %w", err)
	}
	t.dirty = false
	t.lastSave = time.Now()
	return nil
}

// tailFile is a file being read.
type tailFile struct {
	id    fileID
	idStr string
	path  string // the path it was found under: Record.File
	cur   string // the path it was last seen under
	cfg   *FileConfig
	f     *os.File

	readPos   int64  // next byte to read
	lineStart int64  // offset of the line in pending
	pending   []byte // start of a line whose end was not read yet
	cut       bool   // pending holds MaxLineBytes of a longer line: skip to its end
	align     bool   // started inside a line: skip to the next line start
	lastByte  int    // byte before readPos, -1 if unknown
	atEOF     bool   // the last read reached the end

	batchEnd int64 // end of the last line in the current batch
	inBatch  bool

	seen       bool // found by the current scan
	orphan     bool // no longer at a watched path: rotated or deleted
	orphanedAt time.Time
	lastData   time.Time
	readErr    string // last read error logged
}

// resetPending empties pending, and frees it after a long line so that
// many files do not each keep MaxLineBytes.
func (f *tailFile) resetPending() {
	if cap(f.pending) > 4<<10 {
		f.pending = nil
	} else {
		f.pending = f.pending[:0]
	}
}

// runner is the state of one Run.
type runner struct {
	t   *Tailer
	ctx context.Context
	out func([]Record) error
	log *slog.Logger

	files []*tailFile // in the order found
	byID  map[fileID]*tailFile

	buf     []byte // shared read buffer
	fpBuf   [fingerprintBytes]byte
	batch   []Record
	touched []*tailFile // files with lines in batch
	parser  parser
	now     time.Time

	pathErr   map[string]string // last error logged per path
	recovered bool              // saved entries without a watched path were looked for
}

func (r *runner) loop() error {
	poll := r.t.opts.PollInterval
	timer := time.NewTimer(poll)
	defer timer.Stop()
	// Scans happen at fixed instants of the clock (PollPhase) rather than
	// poll after the last one, so that a process doing other periodic work
	// at those instants (the agent sends its outboxes then) wakes once for
	// both.
	var nextScan time.Time
	for {
		if r.ctx.Err() != nil {
			return nil
		}
		r.now = time.Now()
		if !r.now.Before(nextScan) {
			if err := r.scan(); err != nil {
				return err
			}
			nextScan = ctxwait.NextTick(r.now, poll, r.t.opts.PollPhase)
		}
		progress, err := r.round()
		if err != nil {
			return err
		}
		if err := r.flush(); err != nil {
			return err
		}
		if err := r.closeOrphans(); err != nil {
			return err
		}
		if r.t.dirty && time.Since(r.t.lastSave) >= r.t.opts.StateInterval {
			if err := r.t.save(); err != nil {
				// Delivery goes on; a crash now re-delivers more.
				r.log.Error("saving log offsets failed", "err", err)
				r.t.lastSave = time.Now()
			}
		}
		if r.t.afterLoop != nil {
			r.t.afterLoop()
		}
		if progress {
			continue
		}
		wait := time.Until(nextScan)
		if wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-r.ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// round reads new data: rotated files to their end first, so that their
// lines come before those of their successors, then one buffer from each of
// the other files, so that a busy file does not hold up the rest.
func (r *runner) round() (progress bool, err error) {
	for _, f := range r.files {
		if !f.orphan {
			continue
		}
		for r.ctx.Err() == nil {
			n, err := r.read(f)
			if err != nil {
				return progress, err
			}
			if n > 0 {
				progress = true
			}
			if f.atEOF {
				break
			}
		}
	}
	for _, f := range r.files {
		if f.orphan || r.ctx.Err() != nil {
			continue
		}
		n, err := r.read(f)
		if err != nil {
			return progress, err
		}
		if n > 0 {
			progress = true
		}
	}
	return progress, nil
}

// read reads one buffer of f and turns it into records. Errors it returns
// come from delivery; a read error is logged and the file retried later.
func (r *runner) read(f *tailFile) (int, error) {
	// After an idle period, read from one byte early: if that byte is not
	// the one read last time, the file was truncated and written again
	// past our position since we last looked (copytruncate).
	off := f.readPos
	check := f.atEOF && f.lastByte >= 0 && off > 0
	if check {
		off--
	}
	n, err := f.f.ReadAt(r.buf, off)
	f.atEOF = n < len(r.buf)
	if err != nil && !errors.Is(err, io.EOF) {
		if msg := err.Error(); msg != f.readErr {
			f.readErr = msg
			r.log.Warn("reading a log file failed", "file", f.path, "err", err)
		}
		f.atEOF = true
	}
	data := r.buf[:n]
	if check && n > 0 {
		if int(data[0]) != f.lastByte {
			return n, r.restart(f, -1)
		}
		data = data[1:]
	}
	if len(data) == 0 {
		return 0, nil
	}
	f.readErr = ""
	r.now = time.Now()
	f.lastData = r.now
	return len(data), r.consume(f, data)
}

// consume splits data, read at f.readPos, into lines.
func (r *runner) consume(f *tailFile, data []byte) error {
	base := f.readPos
	f.readPos += int64(len(data))
	f.lastByte = int(data[len(data)-1])
	maxLine := r.t.opts.MaxLineBytes
	for i := 0; i < len(data); {
		if f.cut || f.align {
			j := bytes.IndexByte(data[i:], '\n')
			if j < 0 {
				return nil
			}
			end := base + int64(i+j+1)
			i += j + 1
			if f.cut {
				f.cut = false
				err := r.emit(f, f.pending, f.lineStart, end, true)
				f.resetPending()
				f.lineStart = end
				if err != nil {
					return err
				}
			} else {
				f.align = false
				f.lineStart = end
				r.mark(f, end)
			}
			continue
		}
		if len(f.pending) == 0 {
			// NUL bytes between lines are the hole a writer without
			// O_APPEND leaves after copytruncate; they are not a line.
			for i < len(data) && data[i] == 0 {
				i++
			}
			f.lineStart = base + int64(i)
			if i == len(data) {
				return nil
			}
		}
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			rest := data[i:]
			if room := maxLine - len(f.pending); len(rest) > room {
				f.pending = append(f.pending, rest[:room]...)
				f.cut = true
			} else {
				f.pending = append(f.pending, rest...)
			}
			return nil
		}
		line := data[i : i+j]
		end := base + int64(i+j+1)
		i += j + 1
		truncated := false
		if len(f.pending) > 0 {
			if room := maxLine - len(f.pending); len(line) > room {
				line, truncated = line[:room], true
			}
			f.pending = append(f.pending, line...)
			line = f.pending
		} else if len(line) > maxLine {
			line, truncated = line[:maxLine], true
		}
		err := r.emit(f, line, f.lineStart, end, truncated)
		f.resetPending()
		f.lineStart = end
		if err != nil {
			return err
		}
	}
	return nil
}

// mark notes that f's lines up to end are in the current batch.
func (r *runner) mark(f *tailFile, end int64) {
	f.batchEnd = end
	if !f.inBatch {
		f.inBatch = true
		r.touched = append(r.touched, f)
	}
}

// emit parses a line of f, [off, end) in the file, into the batch and
// delivers the batch when it is full.
func (r *runner) emit(f *tailFile, line []byte, off, end int64, truncated bool) error {
	r.mark(f, end)
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if truncated {
		line = trimPartialRune(line)
	}
	if blank(line) {
		return nil
	}
	var s string
	if utf8.Valid(line) {
		s = string(line)
	} else {
		// Records end up in protobuf strings, which must be UTF-8.
		s = strings.ToValidUTF8(string(line), "\uFFFD")
	}
	r.batch = append(r.batch, Record{
		Host:      r.t.opts.Host,
		App:       f.cfg.App,
		File:      f.path,
		Offset:    off,
		FileID:    f.idStr,
		Truncated: truncated,
	})
	r.parser.parse(&r.batch[len(r.batch)-1], s, f.cfg.Format, r.now)
	if len(r.batch) >= r.t.opts.BatchSize {
		return r.flush()
	}
	return nil
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != 0 {
			return false
		}
	}
	return true
}

// trimPartialRune drops a multi-byte character cut in half at the end of b,
// so that a cut line does not end in U+FFFD.
func trimPartialRune(b []byte) []byte {
	for k := 1; k <= utf8.UTFMax && k <= len(b); k++ {
		if c := b[len(b)-k]; utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRune(b[len(b)-k:]) {
				return b[:len(b)-k]
			}
			break
		}
	}
	return b
}

// flush delivers the batch and commits the offsets of its files.
func (r *runner) flush() error {
	if len(r.batch) > 0 {
		if err := r.out(r.batch); err != nil {
			return fmt.Errorf("logtail: deliver %d records from %s: %w", len(r.batch), r.batch[0].File, err)
		}
		clear(r.batch) // drop references to the delivered strings
		r.batch = r.batch[:0]
	}
	for _, f := range r.touched {
		f.inBatch = false
		r.commit(f, f.batchEnd, false)
	}
	r.touched = r.touched[:0]
	return nil
}

// commit records that f was delivered up to off.
func (r *runner) commit(f *tailFile, off int64, align bool) {
	t := r.t
	e := t.state[f.idStr]
	if e == nil {
		e = &stateEntry{ID: f.idStr, Path: f.path}
		t.state[f.idStr] = e
	}
	if off < e.Offset || off < int64(e.FPLen) {
		e.FPLen, e.FP, e.fpDone = 0, "", false // truncated: the start changed
	}
	e.Offset, e.Align = off, align
	if !e.fpDone && off > int64(e.FPLen) {
		n := int(min(off, fingerprintBytes))
		if fp, ok := fingerprint(f.f, n, r.fpBuf[:]); ok {
			e.FPLen, e.FP, e.fpDone = n, fp, n >= fingerprintBytes
		}
	}
	t.dirty = true
}

// fingerprintMatches reports whether fh starts with the bytes e was saved for.
func (r *runner) fingerprintMatches(fh *os.File, e *stateEntry) bool {
	if e.FPLen == 0 {
		return true
	}
	fp, ok := fingerprint(fh, e.FPLen, r.fpBuf[:])
	return ok && fp == e.FP
}

// scan expands the paths, starts following new files, notices rotated,
// deleted and truncated ones. The batch is empty when it is called.
func (r *runner) scan() error {
	first := !r.t.started
	for _, f := range r.files {
		f.seen = false
	}
	for i := range r.t.opts.Files {
		cfg := &r.t.opts.Files[i]
		for _, p := range expand(cfg.Path) {
			r.consider(p, cfg, first)
		}
	}
	if !r.recovered {
		r.recover()
		r.recovered = true
	}
	r.t.started = true
	for _, f := range r.files {
		if !f.seen && !f.orphan {
			f.orphan, f.orphanedAt = true, r.now
			r.log.Info("log file was rotated or removed; reading it to its end", "file", f.path, "file_id", f.idStr)
		}
		if err := r.checkTruncated(f); err != nil {
			return err
		}
	}
	return nil
}

func expand(pattern string) []string {
	if !strings.ContainsAny(pattern, `*?[\`) {
		return []string{pattern}
	}
	m, _ := filepath.Glob(pattern) // the pattern was checked in New
	return m
}

// pathError logs an error about a path once until it changes.
func (r *runner) pathError(path string, err error) {
	if msg := err.Error(); r.pathErr[path] != msg {
		r.pathErr[path] = msg
		r.log.Warn("cannot read log file", "file", path, "err", err)
	}
}

// consider looks at one path matching cfg.
func (r *runner) consider(path string, cfg *FileConfig, first bool) {
	fi, err := os.Stat(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.pathError(path, err)
			// A passing stat error is not a rotation.
			for _, f := range r.files {
				if f.cur == path {
					f.seen = true
				}
			}
		}
		return
	}
	if !fi.Mode().IsRegular() {
		return
	}
	if f := r.byID[fileIDOf(fi, path)]; f != nil {
		r.see(f, path)
		return
	}
	fh, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.pathError(path, err)
		}
		return
	}
	fi, err = fh.Stat() // the file opened, which may be newer than the one stat saw
	if err != nil {
		fh.Close()
		r.pathError(path, err)
		return
	}
	id := fileIDOf(fi, path)
	if f := r.byID[id]; f != nil {
		fh.Close()
		r.see(f, path)
		return
	}
	delete(r.pathErr, path)
	f := &tailFile{id: id, idStr: id.String(), path: path, cur: path, cfg: cfg, f: fh, lastByte: -1, seen: true}
	start, align := r.startOffset(f, fi.Size(), first)
	f.readPos, f.lineStart, f.align = start, start, align
	r.track(f)
	r.commit(f, start, align)
	r.log.Info("following log file", "file", path, "file_id", f.idStr, "offset", start)
}

func (r *runner) see(f *tailFile, path string) {
	f.seen, f.cur = true, path
	if f.orphan {
		f.orphan = false
		r.log.Info("log file is back", "file", f.path, "path", path)
	}
}

func (r *runner) track(f *tailFile) {
	r.files = append(r.files, f)
	r.byID[f.id] = f
}

// startOffset decides where reading a newly opened file begins. With align
// set the offset may be inside a line and reading skips to the next line.
func (r *runner) startOffset(f *tailFile, size int64, first bool) (int64, bool) {
	t := r.t
	if e := t.state[f.idStr]; e != nil {
		if e.Offset <= size && r.fingerprintMatches(f.f, e) {
			return e.Offset, e.Align
		}
		r.log.Info("log file changed since its offset was saved; reading it from the start",
			"file", f.path, "saved_offset", e.Offset, "size", size)
		delete(t.state, f.idStr)
		return 0, false
	}
	if !first || t.pathKnown(f.path) {
		// New since the tailer started, or the successor of a file it
		// followed before a restart: all of its lines are new.
		return 0, false
	}
	start := size
	if f.cfg.StartAt == StartAtBeginning {
		if f.cfg.MaxInitialBytes < 0 || size <= f.cfg.MaxInitialBytes {
			return 0, false
		}
		start = size - f.cfg.MaxInitialBytes
	}
	if start == 0 {
		return 0, false
	}
	// Reading from the byte before start skips the rest of the line it
	// belongs to, or just its newline if start is a line start.
	return start - 1, true
}

// pathKnown reports whether a saved entry was for path.
func (t *Tailer) pathKnown(path string) bool {
	for _, e := range t.state {
		if e.Path == path {
			return true
		}
	}
	return false
}

// recover looks for saved files that no watched path leads to any more:
// rotated while the tailer was down (app.log -> app.log.1, found by inode in
// the same directory) they are read to their end; otherwise their entry is
// dropped.
func (r *runner) recover() {
	dirs := make(map[string][]fs.DirEntry)
	for key, e := range r.t.state {
		tracked := false
		for _, f := range r.files {
			if f.idStr == key {
				tracked = true
				break
			}
		}
		if tracked {
			continue
		}
		if _, failing := r.pathErr[e.Path]; failing {
			continue // there, but not readable right now
		}
		if f := r.findRotated(e, dirs); f != nil {
			r.track(f)
			r.log.Info("reading a log file rotated while the tailer was stopped", "file", e.Path, "now", f.cur, "offset", e.Offset)
			continue
		}
		delete(r.t.state, key)
		r.t.dirty = true
		r.log.Info("log file with a saved offset is gone", "file", e.Path, "file_id", e.ID, "offset", e.Offset)
	}
}

func (r *runner) findRotated(e *stateEntry, dirs map[string][]fs.DirEntry) *tailFile {
	cfg := r.configFor(e.Path)
	if cfg == nil {
		return nil // no longer configured
	}
	dir := filepath.Dir(e.Path)
	ents, ok := dirs[dir]
	if !ok {
		ents, _ = os.ReadDir(dir)
		dirs[dir] = ents
	}
	for _, de := range ents {
		if !de.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, de.Name())
		info, err := de.Info()
		if err != nil || fileIDOf(info, p).String() != e.ID {
			continue
		}
		fh, err := os.Open(p)
		if err != nil {
			r.pathError(p, err)
			return nil
		}
		fi, err := fh.Stat()
		if err != nil || fileIDOf(fi, p).String() != e.ID || e.Offset > fi.Size() || !r.fingerprintMatches(fh, e) {
			fh.Close()
			return nil
		}
		id := fileIDOf(fi, p)
		return &tailFile{
			id: id, idStr: e.ID, path: e.Path, cur: p, cfg: cfg, f: fh,
			readPos: e.Offset, lineStart: e.Offset, align: e.Align, lastByte: -1,
			orphan: true, orphanedAt: r.now,
		}
	}
	return nil
}

// configFor returns the first FileConfig whose path matches path.
func (r *runner) configFor(path string) *FileConfig {
	for i := range r.t.opts.Files {
		cfg := &r.t.opts.Files[i]
		if ok, _ := filepath.Match(cfg.Path, path); ok || cfg.Path == path {
			return cfg
		}
	}
	return nil
}

// checkTruncated starts f again from 0 when it is shorter than the read
// position (truncated).
func (r *runner) checkTruncated(f *tailFile) error {
	fi, err := f.f.Stat()
	if err != nil || fi.Size() >= f.readPos {
		return nil
	}
	return r.restart(f, fi.Size())
}

// restart reads a truncated file again from its start.
func (r *runner) restart(f *tailFile, size int64) error {
	if size >= 0 {
		r.log.Info("log file was truncated; reading it again from the start", "file", f.path, "offset", f.readPos, "size", size)
	} else {
		r.log.Info("log file was rewritten; reading it again from the start", "file", f.path, "offset", f.readPos)
	}
	if err := r.finish(f); err != nil {
		return err
	}
	f.readPos, f.lineStart, f.lastByte, f.atEOF = 0, 0, -1, false
	r.commit(f, 0, false)
	return nil
}

// finish delivers what is pending of f: a last line without a newline.
func (r *runner) finish(f *tailFile) error {
	if len(f.pending) > 0 && !f.align {
		if err := r.emit(f, f.pending, f.lineStart, f.readPos, f.cut); err != nil {
			return err
		}
	}
	f.resetPending()
	f.cut, f.align = false, false
	return r.flush()
}

// closeOrphans stops following rotated and deleted files read to their end
// that have had no new data for RotateWait.
func (r *runner) closeOrphans() error {
	wait := r.t.opts.RotateWait
	for i := 0; i < len(r.files); i++ {
		f := r.files[i]
		if !f.orphan || !f.atEOF || r.now.Sub(f.orphanedAt) < wait || r.now.Sub(f.lastData) < wait {
			continue
		}
		if err := r.finish(f); err != nil {
			return err
		}
		f.f.Close()
		delete(r.byID, f.id)
		delete(r.t.state, f.idStr)
		r.t.dirty = true
		r.files = slices.Delete(r.files, i, i+1)
		i--
		r.log.Info("finished reading rotated or removed log file", "file", f.path, "file_id", f.idStr, "offset", f.readPos)
	}
	return nil
}

func (r *runner) closeAll() {
	for _, f := range r.files {
		f.f.Close()
	}
	r.files = nil
}
