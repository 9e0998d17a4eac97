package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// rec returns record i: its index, then filler, size bytes in all (at least 8).
func rec(i, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < len(b); j++ {
		b[j] = byte(i + j)
	}
	return b
}

func recIndex(t testing.TB, b []byte) int {
	t.Helper()
	if len(b) < 8 {
		t.Fatalf("record of %d bytes has no index", len(b))
	}
	i := int(binary.BigEndian.Uint64(b))
	if !bytes.Equal(b, rec(i, len(b))) {
		t.Fatalf("record %d has wrong content", i)
	}
	return i
}

// sizeOf gives record i a deterministic size in [8, 300].
func sizeOf(i int) int { return 8 + (i*7919)%293 }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t testing.TB, opts Options) *Spool {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendRange(t testing.TB, s *Spool, from, to, batch int) {
	t.Helper()
	for i := from; i < to; i += batch {
		var recs [][]byte
		for j := i; j < min(i+batch, to); j++ {
			recs = append(recs, rec(j, sizeOf(j)))
		}
		if err := s.Append(recs...); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

// drain peeks and acks everything, returning the record indexes in order.
func drain(t testing.TB, s *Spool, maxRecs, maxBytes int) []int {
	t.Helper()
	var got []int
	for {
		b, err := s.Peek(maxRecs, maxBytes)
		if err != nil {
			t.Fatalf("Peek: %v", err)
		}
		if b.Len() == 0 {
			return got
		}
		for _, r := range b.Records {
			got = append(got, recIndex(t, r))
		}
		if err := s.Ack(b); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

// without returns s without the value v.
func without(s []int, v int) []int {
	return slices.DeleteFunc(slices.Clone(s), func(x int) bool { return x == v })
}

func seq(from, to int) []int {
	var r []int
	for i := from; i < to; i++ {
		r = append(r, i)
	}
	return r
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func checkInvariants(t testing.TB, s *Spool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.segs) == 0 || s.segs[0].seq != s.pos.seq {
		t.Fatalf("position %+v is not in the first segment", s.pos)
	}
	var recs, disk int64
	for _, g := range s.segs {
		recs += g.records
		disk += g.disk
	}
	if recs != s.totalRecords || disk != s.diskBytes {
		t.Fatalf("totals drifted: records %d vs %d, disk %d vs %d", recs, s.totalRecords, disk, s.diskBytes)
	}
}

func TestOrderAcrossSegments(t *testing.T) {
	for _, tc := range []struct {
		name              string
		batch             int
		maxRecs, maxBytes int
	}{
		{"batch1-peek1", 1, 1, 0},
		{"batch100-peek7", 100, 7, 0},
		{"batch33-peek1KiB", 33, 0, 1024},
		{"batch500-unlimited", 500, 0, 0},
		{"batch13-peek50-2KiB", 13, 50, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, Options{Dir: dir, SegmentBytes: 1024, Sync: SyncNever})
			const n = 3000
			appendRange(t, s, 0, n, tc.batch)
			st := s.Stats()
			if st.PendingRecords != n || st.Segments < 100 {
				t.Fatalf("after append: %+v", st)
			}
			checkInvariants(t, s)
			if got := drain(t, s, tc.maxRecs, tc.maxBytes); !slices.Equal(got, seq(0, n)) {
				t.Fatalf("got %d records, want %d in order", len(got), n)
			}
			checkInvariants(t, s)
			st = s.Stats()
			if st.PendingRecords != 0 || st.PendingBytes != 0 || st.Segments != 1 {
				t.Fatalf("after drain: %+v", st)
			}
			if files := segFiles(t, dir); len(files) != 1 {
				t.Fatalf("acknowledged segments not deleted: %v", files)
			}
		})
	}
}

func TestPeekLimits(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir(), SegmentBytes: 4096})
	recs := [][]byte{rec(0, 100), rec(1, 100), rec(2, 5000), rec(3, 10), {}, rec(5, 10)}
	if err := s.Append(recs...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name              string
		maxRecs, maxBytes int
		want              int
	}{
		{"count", 2, 0, 2},
		{"bytes exact", 0, 200, 2},
		{"bytes short", 0, 199, 1},
		{"first record always", 0, 1, 1},
		{"unlimited", 0, 0, 6},
		{"count wins", 1, 1 << 20, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := s.Peek(tc.maxRecs, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != tc.want {
				t.Fatalf("got %d records, want %d", b.Len(), tc.want)
			}
			for i, r := range b.Records {
				if !bytes.Equal(r, recs[i]) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
	// A record larger than maxBytes, and larger than a segment, comes alone.
	b, _ := s.Peek(2, 0)
	if err := s.Ack(b); err != nil {
		t.Fatal(err)
	}
	b, _ = s.Peek(0, 10)
	if b.Len() != 1 || !bytes.Equal(b.Records[0], recs[2]) {
		t.Fatalf("oversized record: got %d records", b.Len())
	}
	if err := s.Ack(b); err != nil {
		t.Fatal(err)
	}
	b, _ = s.Peek(0, 0)
	if b.Len() != 3 || len(b.Records[1]) != 0 || b.Records[1] == nil {
		t.Fatalf("empty record: got %q", b.Records)
	}
	// Records must not alias each other: appending to one must not clobber the next.
	_ = append(b.Records[0], 'x')
	if !bytes.Equal(b.Records[2], recs[5]) {
		t.Fatal("records alias the read buffer")
	}
}

func TestReopen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		acked int // records acknowledged before reopen
	}{
		{"nothing acked", 0},
		{"some acked mid-segment", 37},
		{"acked to a segment boundary", 0}, // set below
		{"most acked", 990},
		{"all acked", 1000},
	} {
		// Lazy acks (the agent's) are written, not synced: a process that
		// stops, crashed or not, still resumes past them.
		for _, lazy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lazyacks=%t", tc.name, lazy), func(t *testing.T) {
				dir := t.TempDir()
				opts := Options{Dir: dir, SegmentBytes: 2048, LazyAcks: lazy}
				s := open(t, opts)
				const n = 1000
				appendRange(t, s, 0, n, 10)
				acked := tc.acked
				if tc.name == "acked to a segment boundary" {
					acked = int(s.segs[0].records + s.segs[1].records)
				}
				for done := 0; done < acked; {
					b, err := s.Peek(min(7, acked-done), 0)
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Ack(b); err != nil {
						t.Fatal(err)
					}
					done += b.Len()
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = open(t, opts)
				checkInvariants(t, s)
				if st := s.Stats(); st.PendingRecords != int64(n-acked) {
					t.Fatalf("pending after reopen = %d, want %d", st.PendingRecords, n-acked)
				}
				// Appends after reopen come after the old records.
				appendRange(t, s, n, n+50, 7)
				if got := drain(t, s, 64, 0); !slices.Equal(got, seq(acked, n+50)) {
					t.Fatalf("after reopen got %v..., want %d..%d", got[:min(len(got), 5)], acked, n+50)
				}
				s.Close()
				s = open(t, opts)
				if b, _ := s.Peek(0, 0); b.Len() != 0 {
					t.Fatalf("acknowledged records resent: %d", b.Len())
				}
			})
		}
	}
}

func TestUnackedBatchIsResentAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	appendRange(t, s, 0, 10, 10)
	b1, _ := s.Peek(3, 0)
	s.Ack(b1)
	b2, _ := s.Peek(3, 0) // "sent", crash before Ack
	if b2.Len() != 3 {
		t.Fatal(b2.Len())
	}
	s.Close()
	s = open(t, Options{Dir: dir})
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(3, 10)) {
		t.Fatalf("got %v", got)
	}
}

func TestTornTail(t *testing.T) {
	// Records 0..9 of 100 bytes each: record k starts at 8 + k*108.
	const size, n = 100, 10
	last := int64(segHeaderLen + (n-1)*(recordHeaderLen+size))
	for _, tc := range []struct {
		name    string
		cut     int64 // new file size
		want    int   // records that survive
		torn    int64 // TruncatedBytes
		garbage []byte
	}{
		{"mid header", last + 3, n - 1, 3, nil},
		{"after header", last + recordHeaderLen, n - 1, recordHeaderLen, nil},
		{"mid payload", last + recordHeaderLen + 50, n - 1, recordHeaderLen + 50, nil},
		{"one byte short", last + recordHeaderLen + size - 1, n - 1, recordHeaderLen + size - 1, nil},
		{"intact", last + recordHeaderLen + size, n, 0, nil},
		{"zeros appended", last + recordHeaderLen + size, n, 4096, make([]byte, 4096)},
		{"only header", segHeaderLen, 0, 0, nil},
		{"torn segment header", 5, 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir}
			s := open(t, opts)
			appendRange0 := func(from, to int) {
				for i := from; i < to; i++ {
					if err := s.Append(rec(i, size)); err != nil {
						t.Fatal(err)
					}
				}
			}
			appendRange0(0, n)
			s.Close()
			path := segFiles(t, dir)[0]
			if err := os.Truncate(path, tc.cut); err != nil {
				t.Fatal(err)
			}
			if tc.garbage != nil {
				f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				f.Write(tc.garbage)
				f.Close()
			}
			s = open(t, opts)
			st := s.Stats()
			if st.TruncatedBytes != tc.torn || st.PendingRecords != int64(tc.want) || st.Corruptions != 0 {
				t.Fatalf("stats after recovery: %+v", st)
			}
			appendRange0(100, 105)
			want := append(seq(0, tc.want), seq(100, 105)...)
			s.Close()
			s = open(t, opts) // the repaired file must reopen cleanly
			if st := s.Stats(); st.TruncatedBytes != 0 {
				t.Fatalf("second recovery truncated again: %+v", st)
			}
			if got := drain(t, s, 3, 0); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

// segmentLayout appends n records of size bytes with segments holding perSeg
// records each, and returns the spool's directory.
func segmentLayout(t *testing.T, n, size, perSeg int) (dir string, opts Options) {
	t.Helper()
	dir = t.TempDir()
	opts = Options{Dir: dir, SegmentBytes: int64(segHeaderLen + perSeg*(recordHeaderLen+size)), Sync: SyncNever}
	s := open(t, opts)
	for i := range n {
		if err := s.Append(rec(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(segFiles(t, dir)); got != (n+perSeg-1)/perSeg {
		t.Fatalf("%d segments, want %d", got, (n+perSeg-1)/perSeg)
	}
	s.Close()
	return dir, opts
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptRecord(t *testing.T) {
	// 50 records of 100 bytes, 10 per segment: segment k holds 10k..10k+9.
	const size = 100
	recOff := func(k int) int64 { return int64(segHeaderLen + k*(recordHeaderLen+size)) }
	for _, tc := range []struct {
		name      string
		seg       int   // segment file index
		off       int64 // byte to flip
		runtime   bool  // flip while open (after Open's scan)
		want      []int
		truncated bool // tail damage: repaired by truncation, not a corruption
	}{
		// One damaged record costs that record alone: the reader
		// resynchronises on the next record marker.
		{"payload mid segment", 1, recOff(3) + recordHeaderLen + 40, false, without(seq(0, 50), 13), false},
		{"length field", 2, recOff(5) + 5, false, without(seq(0, 50), 25), false},
		{"marker", 2, recOff(5) + 1, false, without(seq(0, 50), 25), false},
		{"crc field", 0, recOff(0) + 9, false, seq(1, 50), false},
		{"segment header", 3, 1, false, append(seq(0, 30), seq(40, 50)...), false},
		{"newest segment at open", 4, recOff(6) + 20, false, without(seq(0, 50), 46), false},
		{"last record of the newest segment at open", 4, recOff(9) + 20, false, seq(0, 49), true},
		{"payload at runtime", 1, recOff(3) + recordHeaderLen + 40, true, without(seq(0, 50), 13), false},
		{"last record of sealed segment at runtime", 2, recOff(9) + 9, true, append(seq(0, 29), seq(30, 50)...), false},
		{"newest segment at runtime", 4, recOff(6) + 20, true, without(seq(0, 50), 46), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, opts := segmentLayout(t, 50, size, 10)
			path := segFiles(t, dir)[tc.seg]
			var s *Spool
			if tc.runtime {
				s = open(t, opts)
				flipByte(t, path, tc.off)
			} else {
				flipByte(t, path, tc.off)
				s = open(t, opts)
			}
			want := tc.want
			// Peek twice without acking: the corruption must be counted once.
			if _, err := s.Peek(0, 0); err != nil {
				t.Fatal(err)
			}
			got := drain(t, s, 4, 0)
			if !slices.Equal(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			st := s.Stats()
			wantCorrupt := int64(1)
			if tc.truncated {
				wantCorrupt = 0
				if st.TruncatedBytes == 0 {
					t.Fatalf("tail damage not truncated: %+v", st)
				}
			}
			if st.Corruptions != wantCorrupt || st.PendingRecords != 0 || st.Segments != 1 {
				t.Fatalf("stats: %+v", st)
			}
			checkInvariants(t, s)
			// The queue keeps working.
			appendRange(t, s, 100, 110, 3)
			if got := drain(t, s, 0, 0); !slices.Equal(got, seq(100, 110)) {
				t.Fatalf("after corruption got %v", got)
			}
		})
	}
}

func TestPendingCountIsExactAfterCorruption(t *testing.T) {
	dir, opts := segmentLayout(t, 30, 100, 10)
	s := open(t, opts)
	flipByte(t, segFiles(t, dir)[1], segHeaderLen+4*(recordHeaderLen+100)+20) // record 14
	b, err := s.Peek(12, 0)                                                   // 0..9, 10..11
	if err != nil || b.Len() != 12 {
		t.Fatal(b.Len(), err)
	}
	s.Ack(b)
	if p := s.Stats().PendingRecords; p != 18 {
		t.Fatalf("pending = %d before corruption is seen, want 18", p)
	}
	b, _ = s.Peek(0, 0) // 12, 13, skip 14, 15..29
	if b.Len() != 17 {
		t.Fatalf("got %d", b.Len())
	}
	if p := s.Stats().PendingRecords; p != 17 {
		t.Fatalf("pending = %d after corruption is seen, want 17", p)
	}
	s.Ack(b)
	if st := s.Stats(); st.PendingRecords != 0 || st.Corruptions != 1 || st.SkippedBytes != recordHeaderLen+100 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestCorruptOnlyDataIsSkippedWithoutAck(t *testing.T) {
	// If all that is pending is corrupt, Peek returns nothing and Wait must
	// not report anything pending (else the sender would spin).
	dir, opts := segmentLayout(t, 20, 100, 10)
	files := segFiles(t, dir)
	s := open(t, opts)
	drainN := func(n int) {
		b, _ := s.Peek(n, 0)
		if b.Len() != n {
			t.Fatalf("got %d", b.Len())
		}
		s.Ack(b)
	}
	drainN(10)
	for k := range 10 { // every record of the second segment
		flipByte(t, files[1], int64(segHeaderLen+k*(recordHeaderLen+100)+2))
	}
	b, err := s.Peek(0, 0)
	if err != nil || b.Len() != 0 {
		t.Fatalf("got %d records, err %v", b.Len(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled (nothing pending)", err)
	}
	if st := s.Stats(); st.PendingRecords != 0 || st.Corruptions != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestMaxBytesDropsOldest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ackedN int // records acked before the flood
		holdN  int // a batch peeked before the flood and acked after it
	}{
		{"nothing acked", 0, 0},
		{"some acked", 15, 0},
		{"batch in flight", 5, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const segBytes, maxBytes = 1024, 4096
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: segBytes, MaxBytes: maxBytes, Sync: SyncNever}
			s := open(t, opts)
			appendRange(t, s, 0, 40, 1)
			if tc.ackedN > 0 {
				b, _ := s.Peek(tc.ackedN, 0)
				s.Ack(b)
			}
			var held Batch
			if tc.holdN > 0 {
				held, _ = s.Peek(tc.holdN, 0)
			}
			const n = 400
			appendRange(t, s, 40, n, 3)
			st := s.Stats()
			if st.DiskBytes > maxBytes+segBytes {
				t.Fatalf("disk %d over limit: %+v", st.DiskBytes, st)
			}
			if st.DroppedRecords == 0 {
				t.Fatalf("nothing dropped: %+v", st)
			}
			if len(segFiles(t, dir)) != st.Segments {
				t.Fatalf("segment files %d, stats %d", len(segFiles(t, dir)), st.Segments)
			}
			if int(st.DroppedRecords+st.PendingRecords)+tc.ackedN != n {
				t.Fatalf("dropped %d + pending %d + acked %d != %d", st.DroppedRecords, st.PendingRecords, tc.ackedN, n)
			}
			if tc.holdN > 0 {
				// The held batch was (at least partly) dropped for space:
				// acking it is allowed and removes what is left of it.
				if err := s.Ack(held); err != nil {
					t.Fatalf("ack of dropped batch: %v", err)
				}
			}
			checkInvariants(t, s)
			pending := s.Stats().PendingRecords
			// The position file still names a dropped segment: reopening
			// must start at the oldest remaining one.
			s.Close()
			s = open(t, opts)
			if p := s.Stats().PendingRecords; p != pending {
				t.Fatalf("pending after reopen %d, want %d", p, pending)
			}
			got := drain(t, s, 10, 0)
			// What remains is the newest records, contiguous up to the last one.
			if !slices.Equal(got, seq(n-len(got), n)) || int64(len(got)) != pending {
				t.Fatalf("kept %v (pending %d), want the newest", got, pending)
			}
		})
	}
}

func TestDropWhileBatchSpansIntoKeptSegment(t *testing.T) {
	// The consumer peeks across a segment boundary; a drop then removes the
	// first segment but not the second. Ack must count only the kept part.
	const size = 100
	opts := Options{Dir: t.TempDir(), SegmentBytes: segHeaderLen + 10*(recordHeaderLen+size), MaxBytes: 3 * (segHeaderLen + 10*(recordHeaderLen+size)), Sync: SyncNever}
	s := open(t, opts)
	for i := range 25 { // segments: 0-9, 10-19, 20-24
		s.Append(rec(i, size))
	}
	b, _ := s.Peek(15, 0) // 0..14
	for i := 25; i < 35; i++ {
		s.Append(rec(i, size)) // needs a 4th segment: drops 0..9
	}
	if st := s.Stats(); st.DroppedRecords != 10 || st.PendingRecords != 25 {
		t.Fatalf("stats: %+v", st)
	}
	if err := s.Ack(b); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.PendingRecords != 20 {
		t.Fatalf("after ack: %+v", st)
	}
	checkInvariants(t, s)
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(15, 35)) {
		t.Fatalf("got %v", got)
	}
}

func TestAckErrors(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	appendRange(t, s, 0, 10, 10)
	a, _ := s.Peek(1, 0)
	b, _ := s.Peek(2, 0)
	if err := s.Ack(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(a); err != nil {
		t.Fatalf("second ack of the same batch: %v", err)
	}
	if err := s.Ack(b); !errors.Is(err, ErrAckOrder) {
		t.Fatalf("overlapping ack: %v, want ErrAckOrder", err)
	}
	if err := s.Ack(Batch{}); err != nil {
		t.Fatalf("zero batch: %v", err)
	}
	other := open(t, Options{Dir: t.TempDir()})
	appendRange(t, other, 0, 1, 1)
	ob, _ := other.Peek(1, 0)
	if err := s.Ack(ob); err == nil {
		t.Fatal("ack of another spool's batch succeeded")
	}
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(1, 10)) {
		t.Fatalf("got %v", got)
	}
}

func TestRecordTooLarge(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	err := s.Append(rec(0, 10), make([]byte, MaxRecordBytes+1))
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("got %v", err)
	}
	if st := s.Stats(); st.PendingRecords != 0 {
		t.Fatalf("partial append: %+v", st)
	}
	if err := s.Append(make([]byte, MaxRecordBytes)); err != nil {
		t.Fatalf("max-size record: %v", err)
	}
	b, _ := s.Peek(0, 0)
	if b.Len() != 1 || len(b.Records[0]) != MaxRecordBytes {
		t.Fatal("max-size record not read back")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	s.Close()
	s2 := open(t, Options{Dir: dir})
	s2.Close()

	for _, o := range []Options{
		{},
		{Dir: dir, SegmentBytes: 10},
		{Dir: dir, SegmentBytes: 1 << 20, MaxBytes: 1 << 10},
		{Dir: dir, Sync: SyncPolicy(9)},
	} {
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Open(Options{Dir: file}); err == nil {
		t.Error("Open on a file succeeded")
	}
}

func TestDefaults(t *testing.T) {
	o, err := Options{Dir: "x"}.withDefaults()
	if err != nil || o.SegmentBytes != DefaultSegmentBytes || o.MaxBytes != DefaultMaxBytes || o.Sync != SyncAlways {
		t.Fatalf("%+v %v", o, err)
	}
	o, _ = Options{Dir: "x", MaxBytes: 1 << 20}.withDefaults()
	if o.SegmentBytes != 256<<10 {
		t.Fatalf("small MaxBytes: SegmentBytes %d", o.SegmentBytes)
	}
}

func TestPositionFileCorruptReplaysAll(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	appendRange(t, s, 0, 20, 5)
	b, _ := s.Peek(5, 0)
	s.Ack(b)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, posFileName), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, Options{Dir: dir})
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(0, 20)) {
		t.Fatalf("got %v", got)
	}
}

func TestTornPositionWriteFallsBackToPreviousSlot(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	appendRange(t, s, 0, 20, 5)
	for _, n := range []int{3, 4, 5} { // acks 0..2, 3..6, 7..11
		b, _ := s.Peek(n, 0)
		s.Ack(b)
	}
	latest := posSlotOffset(s.r.posCounter)
	s.Close()
	flipByte(t, filepath.Join(dir, posFileName), latest+20)
	s = open(t, Options{Dir: dir})
	// The previous position (after 0..6) survives: one batch is resent.
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(7, 20)) {
		t.Fatalf("got %v", got)
	}
}

func TestCrashBetweenPositionWriteAndSegmentDelete(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 1024}
	s := open(t, opts)
	appendRange(t, s, 0, 100, 10)
	first := segFiles(t, dir)[0]
	saved, _ := os.ReadFile(first)
	b, _ := s.Peek(60, 0)
	s.Ack(b)
	s.Close()
	os.WriteFile(first, saved, 0o600) // as if the delete never happened
	s = open(t, opts)
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatal("acknowledged segment not deleted at Open")
	}
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(60, 100)) {
		t.Fatalf("got %v", got)
	}
}

func TestWait(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}

	// Wakes on Append.
	done := make(chan error)
	go func() {
		ctx, cancel := deadline()
		defer cancel()
		done <- s.Wait(ctx)
	}()
	// Make sure the waiter is parked before appending, without sleeping.
	testutil.Until(t, 10*time.Second, "the condition", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.notifyArmed })
	appendRange(t, s, 0, 1, 1)
	if err := <-done; err != nil {
		t.Fatalf("Wait after Append: %v", err)
	}

	// Returns at once while something is unacknowledged, even if peeked.
	s.Peek(1, 0)
	ctx, cancel := deadline()
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	drain(t, s, 0, 0)

	// Context cancellation.
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- s.Wait(ctx) }()
	testutil.Until(t, 10*time.Second, "the condition", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.notifyArmed })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v", err)
	}

	// Close.
	go func() {
		ctx, cancel := deadline()
		defer cancel()
		done <- s.Wait(ctx)
	}()
	testutil.Until(t, 10*time.Second, "the condition", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.notifyArmed })
	s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

func TestClosed(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	appendRange(t, s, 0, 3, 3)
	b, _ := s.Peek(1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Append(rec(0, 10)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append: %v", err)
	}
	if _, err := s.Peek(1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Peek: %v", err)
	}
	if err := s.Ack(b); !errors.Is(err, ErrClosed) {
		t.Errorf("Ack: %v", err)
	}
	if err := s.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait: %v", err)
	}
}

func TestSyncPolicies(t *testing.T) {
	for _, p := range []SyncPolicy{SyncAlways, SyncPeriodic, SyncNever} {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 1024, Sync: p, SyncInterval: time.Millisecond}
			s := open(t, opts)
			appendRange(t, s, 0, 200, 9)
			if p == SyncPeriodic {
				testutil.Until(t, 10*time.Second, "the condition", func() bool { s.wmu.Lock(); defer s.wmu.Unlock(); return !s.w.dirty })
			}
			b, _ := s.Peek(50, 0)
			s.Ack(b)
			s.Close()
			s = open(t, opts)
			if got := drain(t, s, 0, 0); !slices.Equal(got, seq(50, 200)) {
				t.Fatalf("got %d records", len(got))
			}
		})
	}
}

func TestConcurrentProducerConsumer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		producers int
		n         int // records per producer
		sync      SyncPolicy
	}{
		{"one producer 100k", 1, 100_000, SyncNever},
		{"four producers", 4, 10_000, SyncNever},
		{"fsync", 1, 5_000, SyncAlways},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.n > 10_000 {
				t.Skip("short")
			}
			s := open(t, Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, Sync: tc.sync})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, tc.producers+1)
			for p := range tc.producers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(p), 1))
					for i := 0; i < tc.n; {
						k := min(1+rng.IntN(50), tc.n-i)
						recs := make([][]byte, k)
						for j := range recs {
							recs[j] = rec(p<<32|(i+j), sizeOf(i+j))
						}
						if err := s.Append(recs...); err != nil {
							errs <- err
							return
						}
						i += k
					}
				})
			}
			next := make([]int, tc.producers)
			total := tc.producers * tc.n
			for got := 0; got < total; {
				if err := s.Wait(ctx); err != nil {
					t.Fatalf("Wait after %d records: %v", got, err)
				}
				b, err := s.Peek(1+got%200, 64<<10)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range b.Records {
					i := recIndex(t, r)
					p, k := i>>32, i&(1<<32-1)
					if k != next[p] {
						t.Fatalf("producer %d: got record %d, want %d", p, k, next[p])
					}
					next[p]++
				}
				got += b.Len()
				if err := s.Ack(b); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if st := s.Stats(); st.PendingRecords != 0 || st.DroppedRecords != 0 {
				t.Fatalf("stats: %+v", st)
			}
			checkInvariants(t, s)
		})
	}
}

func TestConcurrentWithDrops(t *testing.T) {
	// A slow consumer against a bounded spool: whatever it receives must be
	// in order, and received + dropped = appended.
	s := open(t, Options{Dir: t.TempDir(), SegmentBytes: 4 << 10, MaxBytes: 16 << 10, Sync: SyncNever})
	const n = 20_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i += 10 {
			var recs [][]byte
			for j := i; j < i+10; j++ {
				recs = append(recs, rec(j, sizeOf(j)))
			}
			if err := s.Append(recs...); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	last, received := -1, 0
	check := func(b Batch) {
		for _, r := range b.Records {
			i := recIndex(t, r)
			if i <= last {
				t.Fatalf("record %d after %d", i, last)
			}
			last = i
			received++
		}
	}
	producing := true
	for producing {
		select {
		case <-done:
			producing = false
		default:
		}
		b, err := s.Peek(7, 0)
		if err != nil {
			t.Fatal(err)
		}
		check(b)
		if err := s.Ack(b); err != nil {
			t.Fatal(err)
		}
	}
	for {
		b, _ := s.Peek(0, 0)
		if b.Len() == 0 {
			break
		}
		check(b)
		s.Ack(b)
	}
	// A record can be both received and counted as dropped: peeked, then
	// dropped before its Ack. It can't be neither, nor received twice.
	st := s.Stats()
	if int64(received)+st.DroppedRecords < n || last != n-1 || st.DroppedRecords == 0 {
		t.Fatalf("received %d + dropped %d < %d (last %d)", received, st.DroppedRecords, n, last)
	}
	t.Logf("received %d, dropped %d", received, st.DroppedRecords)
	checkInvariants(t, s)
}

func TestErrorsNameTheDirectory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	err := s.Append(make([]byte, MaxRecordBytes+1))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(dir)) {
		t.Fatalf("error %q does not name %s", err, dir)
	}
	// I/O errors carry the file name through *os.PathError.
	var pe *os.PathError
	os.WriteFile(filepath.Join(dir, "blocked"), nil, 0o600)
	_, err = Open(Options{Dir: filepath.Join(dir, "blocked", "x")})
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "blocked") {
		t.Fatalf("error %q does not name the path", err)
	}
}

func TestAppendWriteError(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	appendRange(t, s, 0, 5, 5)
	// Swap the active segment for a read-only handle to make writes fail.
	good := s.w.f
	ro, err := os.Open(good.Name())
	if err != nil {
		t.Fatal(err)
	}
	s.w.f = ro
	err = s.Append(rec(5, 10))
	var pe *os.PathError
	if err == nil || !errors.As(err, &pe) || pe.Path != good.Name() {
		t.Fatalf("Append on a failing file: %v", err)
	}
	if st := s.Stats(); st.PendingRecords != 5 {
		t.Fatalf("failed append was published: %+v", st)
	}
	s.w.f = good
	ro.Close()
	appendRange(t, s, 6, 8, 1)
	if got := drain(t, s, 0, 0); !slices.Equal(got, append(seq(0, 5), 6, 7)) {
		t.Fatalf("got %v", got)
	}
}

// A spool made by an older version, or by hand, with a world-readable
// directory and segments is made private when opened: results carry check
// outputs.
func TestOpenMakesExistingSpoolPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s := open(t, Options{Dir: dir, SegmentBytes: 2048})
	appendRange(t, s, 0, 50, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("spool files: %v %v", entries, err)
	}
	for _, e := range entries {
		if err := os.Chmod(filepath.Join(dir, e.Name()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	open(t, Options{Dir: dir, SegmentBytes: 2048})
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("spool directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", e.Name(), fi.Mode().Perm(), err)
		}
	}
}
