package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/unyo-ops/unyo/core/internal/datasync"
)

// Batch is a run of the oldest unacknowledged records, returned by Peek and
// given back to Ack once the records were delivered.
type Batch struct {
	// Records are the payloads, oldest first. They belong to the caller.
	Records [][]byte

	owner      *Spool
	start, end position
	spans      []span // records taken per segment, for Stats accounting
}

type span struct {
	seq     uint64
	records int64
}

// Len returns the number of records in the batch.
func (b Batch) Len() int { return len(b.Records) }

func (b Batch) recordsIn(seq uint64) int64 {
	for _, sp := range b.spans {
		if sp.seq == seq {
			return sp.records
		}
	}
	return 0
}

// limits bound one Peek.
type limits struct {
	maxRecs, maxBytes int // <= 0: no limit
	recs, bytes       int
}

func (l *limits) done() bool { return l.maxRecs > 0 && l.recs >= l.maxRecs }

// allow reports whether a record of n bytes fits. The first record always
// fits, so that a record larger than maxBytes cannot wedge the queue.
func (l *limits) allow(n int) bool {
	if l.recs == 0 {
		return true
	}
	return !l.done() && (l.maxBytes <= 0 || l.bytes+n <= l.maxBytes)
}

// readAhead is how much to read at once: enough for the rest of the batch
// judging by the average record size, within sane bounds.
func (l *limits) readAhead(avg int) int64 {
	avg = max(avg, 1)
	want := int64(1 << 20)
	if l.maxBytes > 0 {
		rem := int64(max(l.maxBytes-l.bytes, 0))
		want = rem + (rem/int64(avg)+1)*recordHeaderLen
	}
	if l.maxRecs > 0 {
		want = min(want, int64(l.maxRecs-l.recs)*int64(avg+recordHeaderLen))
	}
	return min(max(want, 4<<10), 4<<20)
}

// Peek returns the oldest unacknowledged records without removing them: up
// to maxRecords records (no limit if <= 0) totalling up to maxBytes payload
// bytes (no limit if <= 0), but at least one record if any is pending, however
// large. Until Ack, Peek returns the same records again (the sender retries
// them). An empty batch means nothing is pending; use Wait to block.
//
// A damaged record is skipped up to the next intact one, counted in Stats
// and logged with its file, offset and length.
func (s *Spool) Peek(maxRecords, maxBytes int) (Batch, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for {
		b, retry, err := s.peek(maxRecords, maxBytes)
		if !retry {
			return b, err
		}
	}
}

// peek reads one batch; retry means a segment vanished (dropped for space)
// before anything was read, so the caller should start over.
func (s *Spool) peek(maxRecords, maxBytes int) (b Batch, retry bool, err error) {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return Batch{}, false, ErrClosed
	}
	start, consumed := s.pos, s.consumed
	snap := make([]segment, len(s.segs))
	for i, g := range s.segs {
		snap[i] = segment{seq: g.seq, size: g.size, records: g.records, fr: g.fr, damaged: slices.Clone(g.damaged)}
	}
	s.mu.Unlock()

	lim := limits{maxRecs: maxRecords, maxBytes: maxBytes}
	b = Batch{owner: s, start: start}
	cur := start
	for i := range snap {
		g := &snap[i]
		if lim.done() {
			break
		}
		// from and base say where the segment's pending records start and
		// how many readable records lie before that.
		from, base := int64(segHeaderLen), int64(0)
		if i > 0 {
			cur = position{seq: g.seq, off: segHeaderLen}
		} else {
			from, base = start.off, consumed
		}
		if cur.off >= g.size {
			continue
		}
		f, err := s.readHandle(g.seq)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && s.dropped(g.seq) {
				if len(b.Records) == 0 {
					return Batch{}, true, nil
				}
				break
			}
			return Batch{}, false, err
		}
		n0 := len(b.Records)
		var full bool
		for cur.off < g.size && !full {
			var d damage
			b.Records, cur.off, d, full, err = s.readRange(f, g.fr, cur.off, g.size, &lim, b.Records)
			if err != nil {
				return Batch{}, false, err
			}
			if d == frameOK {
				break
			}
			r, known := g.damagedAt(cur.off)
			if !known {
				if r, err = s.noteDamage(f, g, from, base, cur.off); err != nil {
					return Batch{}, false, err
				}
			}
			cur.off = max(r.next, cur.off+1)
		}
		if n := int64(len(b.Records) - n0); n > 0 {
			b.spans = append(b.spans, span{seq: g.seq, records: n})
		}
		if full {
			break
		}
	}
	b.end = cur
	if lim.recs > 0 {
		s.r.avg = (s.r.avg + lim.bytes/lim.recs) / 2
	}
	if len(b.Records) == 0 && start.less(cur) {
		// Nothing but damaged data: acknowledge the skip right away so that
		// Stats and Wait stop counting it as pending.
		if err := s.ack(b); err != nil {
			return Batch{}, false, err
		}
		return Batch{owner: s, start: cur, end: cur}, false, nil
	}
	return b, false, nil
}

// readHandle returns a read-only handle on segment seq, cached across Peeks.
func (s *Spool) readHandle(seq uint64) (*os.File, error) {
	if s.r.f != nil && s.r.seq == seq {
		return s.r.f, nil
	}
	s.closeReadHandle()
	f, err := os.Open(s.segPath(seq))
	if err != nil {
		return nil, fmt.Errorf("read spool: %w", err)
	}
	s.r.f, s.r.seq = f, seq
	return f, nil
}

func (s *Spool) closeReadHandle() {
	if s.r.f != nil {
		s.r.f.Close()
		s.r.f = nil
	}
}

// dropped reports whether segment seq is no longer part of the spool.
func (s *Spool) dropped(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.segLocked(seq) == nil
}

// noteDamage handles damage found while reading segment g (a snapshot,
// updated here) at offset at, which Open did not see: it scans the
// segment's pending part once more to learn every damaged region and the
// exact number of readable records, records both, logs the new regions
// and returns the region at at.
func (s *Spool) noteDamage(f *os.File, g *segment, from, base, at int64) (region, error) {
	end := g.size
	if fi, err := f.Stat(); err != nil {
		return region{}, fmt.Errorf("read spool: %w", err)
	} else if fi.Size() < end {
		end = fi.Size() // cut behind our back: what is missing reads as damaged
	}
	res, err := scanRecords(f, g.fr, min(from, end), end)
	if err != nil {
		return region{}, fmt.Errorf("read spool: %w", err)
	}
	found := region{at: at, next: g.size, why: pastEnd}
	for i, r := range res.damaged {
		if r.next >= end {
			res.damaged[i].next = g.size
		}
		if r.at == at {
			found = res.damaged[i]
		}
	}
	if _, ok := res.regionAt(at); !ok {
		res.damaged = append(res.damaged, found)
	}
	lost := max(g.records-(base+res.records), 0)

	s.mu.Lock()
	live := s.segLocked(g.seq)
	if live == nil {
		s.mu.Unlock()
		return found, nil
	}
	var fresh []region
	for _, r := range res.damaged {
		if _, ok := live.damagedAt(r.at); !ok {
			live.damaged = append(live.damaged, r)
			fresh = append(fresh, r)
		}
	}
	live.records -= lost
	s.totalRecords -= lost
	for _, r := range fresh {
		s.stats.Corruptions++
		s.stats.SkippedBytes += r.next - r.at
	}
	g.damaged = slices.Clone(live.damaged)
	s.mu.Unlock()
	g.records -= lost
	for _, r := range fresh {
		s.logRegion(s.segPath(g.seq), r, g.size)
	}
	return found, nil
}

// readRange appends to recs the records of f (framed as fr) from off up to
// end, until lim is reached (full) or a damaged record is found (d, at
// next). It returns the offset after the last record taken.
func (s *Spool) readRange(f *os.File, fr framing, off, end int64, lim *limits, recs [][]byte) (_ [][]byte, next int64, d damage, full bool, err error) {
	minChunk := int64(0)
	for off < end {
		if lim.done() {
			return recs, off, frameOK, true, nil
		}
		buf := make([]byte, min(max(lim.readAhead(s.r.avg), minChunk), end-off))
		n, rerr := f.ReadAt(buf, off)
		if rerr != nil {
			if rerr != io.EOF {
				return recs, off, frameOK, false, fmt.Errorf("read spool: %w", rerr)
			}
			// The file is shorter than what was appended: it was truncated
			// behind our back. What is missing reads as damaged.
			if n == 0 {
				return recs, off, pastEnd, false, nil
			}
			buf = buf[:n]
		}
		p := 0
		for {
			at := off + int64(p)
			if at >= end {
				break
			}
			total, d := fr.check(buf[p:], end-at)
			if d == frameShort {
				if p == 0 {
					if rerr == io.EOF {
						return recs, at, pastEnd, false, nil
					}
					minChunk = max(total, fr.hdrLen)
				}
				break
			}
			if d != frameOK {
				return recs, at, d, false, nil
			}
			t := p + int(total)
			payload := buf[p+int(fr.hdrLen) : t : t]
			if !lim.allow(len(payload)) {
				return recs, at, frameOK, true, nil
			}
			recs = append(recs, payload)
			lim.recs++
			lim.bytes += len(payload)
			p = t
		}
		off += int64(p)
	}
	return recs, off, frameOK, false, nil
}

// Ack removes the records of b, which must be the oldest unacknowledged ones
// (normally the batch of the last Peek), and persists the read position so
// that a restart does not resend them. Records appended meanwhile are not
// affected. Acknowledging a batch again, an empty batch, or one whose records
// were meanwhile dropped for space does nothing.
func (s *Spool) Ack(b Batch) error {
	if b.owner == nil && len(b.Records) == 0 {
		return nil
	}
	if b.owner != s {
		return fmt.Errorf("ack to spool %s: the batch was peeked from another Spool (or before a reopen)", s.dir)
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.ack(b)
}

func (s *Spool) ack(b Batch) error {
	if !b.start.less(b.end) {
		return nil
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrClosed
	}
	cur := s.pos
	if !cur.less(b.end) {
		s.mu.Unlock()
		return nil // acknowledged before, or dropped for space
	}
	// A drop moves the position to the start of a later segment; anything
	// else between start and end means b overlaps an acknowledged batch.
	if cur.less(b.start) || (cur != b.start && !(cur.seq > b.start.seq && cur.off == segHeaderLen)) {
		s.mu.Unlock()
		return fmt.Errorf("ack to spool %s: batch starts at segment %d offset %d, oldest unacknowledged record is at segment %d offset %d: %w",
			s.dir, b.start.seq, b.start.off, cur.seq, cur.off, ErrAckOrder)
	}
	// Persist where the next unread record is, past segments read to the end,
	// so that Open deletes them if we crash before we do.
	next := b.end
	for i, g := range s.segs {
		if g.seq == next.seq && next.off >= g.size && i+1 < len(s.segs) {
			next = position{seq: s.segs[i+1].seq, off: segHeaderLen}
		}
	}
	s.mu.Unlock()

	if err := s.writePosition(next); err != nil {
		return err
	}

	s.mu.Lock()
	if s.pos.less(next) {
		// If a drop moved pos meanwhile, it reset consumed for its segment,
		// and b's records in that segment count from its start: same formula.
		if next.seq == s.pos.seq {
			s.consumed += b.recordsIn(next.seq)
		} else {
			s.consumed = b.recordsIn(next.seq)
		}
		s.pos = next
	}
	var gone []*segment
	for len(s.segs) > 1 && s.segs[0].seq < s.pos.seq {
		gone = append(gone, s.segs[0])
		s.dropFrontLocked()
	}
	s.mu.Unlock()
	if s.r.f != nil && s.r.seq < next.seq {
		s.closeReadHandle()
	}
	s.removeSegments(gone)
	return nil
}

// writePosition stores p in the position file slot not holding the
// current position (see encodePosition). Under SyncAlways without
// LazyAcks it is fdatasynced; otherwise a crash may lose recent acks, which
// only means resending.
func (s *Spool) writePosition(p position) error {
	c := s.r.posCounter + 1
	if _, err := s.r.posF.WriteAt(encodePosition(p, c), posSlotOffset(c)); err != nil {
		return fmt.Errorf("save spool read position: %w", err)
	}
	if s.opts.Sync == SyncAlways && !s.opts.LazyAcks {
		if err := datasync.File(s.r.posF); err != nil {
			return fmt.Errorf("save spool read position: %w", err)
		}
	}
	s.r.posCounter = c
	return nil
}
