package spool

import "fmt"

const (
	// flushBytes bounds the encode buffer for a large Append.
	flushBytes = 1 << 20
	// maxKeptBuf: a buffer grown by a huge record is not kept.
	maxKeptBuf = 4 << 20
)

// published is what an Append added to one segment.
type published struct {
	seq     uint64
	size    int64 // segment size after the Append
	records int64
	isNew   bool
}

// Append appends records, in order, after all records appended before.
// Under SyncAlways they are on stable storage when Append returns nil.
// Records are copied, so the caller may reuse them; empty records are allowed.
// A record over MaxRecordBytes fails the whole call (ErrRecordTooLarge)
// before anything is written. On an I/O error a prefix of records may have
// been appended.
//
// Append never blocks on the consumer: if the spool grows over MaxBytes, the
// oldest segments are dropped.
func (s *Spool) Append(records ...[]byte) error {
	for i, r := range records {
		if len(r) > MaxRecordBytes {
			return fmt.Errorf("append to spool %s: record %d of %d has %d bytes, over the limit of %d: %w",
				s.dir, i+1, len(records), len(r), MaxRecordBytes, ErrRecordTooLarge)
		}
	}
	if len(records) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}

	var pub []published
	cur := published{seq: s.w.seq}
	buf := s.w.buf[:0]
	bufRecords := int64(0)
	newSeg := false
	flush := func() error {
		if err := s.writeBuf(buf); err != nil {
			return err
		}
		cur.records += bufRecords
		buf, bufRecords = buf[:0], 0
		return nil
	}
	var err error
	for _, r := range records {
		n := int64(recordHeaderLen + len(r))
		end := s.w.size + int64(len(buf))
		if end > segHeaderLen && end+n > s.opts.SegmentBytes {
			if err = flush(); err != nil {
				break
			}
			cur.size = s.w.size
			pub = append(pub, cur)
			if err = s.rotate(); err != nil {
				// The old segment stays active; publish what was written.
				cur, pub = pub[len(pub)-1], pub[:len(pub)-1]
				break
			}
			newSeg = true
			cur = published{seq: s.w.seq, isNew: true}
		} else if len(buf) >= flushBytes {
			if err = flush(); err != nil {
				break
			}
		}
		buf = appendRecord(buf, r)
		bufRecords++
	}
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = s.syncAppend(newSeg)
	}
	cur.size = s.w.size
	pub = append(pub, cur)
	if cap(buf) <= maxKeptBuf {
		s.w.buf = buf[:0]
	} else {
		s.w.buf = nil
	}
	// Publish even after an error: what reached the file is in the
	// segment now and will be found by the next Open anyway.
	s.publish(pub)
	return err
}

// writeBuf writes buf at the end of the active segment.
func (s *Spool) writeBuf(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if s.w.failAfter > 0 {
		if s.w.writes++; s.w.writes == s.w.failAfter {
			crashMidWrite(s.w.f, buf, s.w.size)
		}
	}
	n, err := s.w.f.WriteAt(buf, s.w.size)
	if err != nil {
		if n > 0 {
			// Keep the file ending on a record boundary. If this fails too,
			// the next write overwrites the garbage, or Open truncates it.
			if terr := s.w.f.Truncate(s.w.size); terr != nil {
				s.log.Error("cannot truncate partial spool append", "file", s.w.f.Name(), "err", terr)
			}
		}
		return fmt.Errorf("append to spool: %w", err)
	}
	s.w.size += int64(n)
	return nil
}

func (s *Spool) syncAppend(newSeg bool) error {
	switch s.opts.Sync {
	case SyncAlways:
		if err := s.w.f.Sync(); err != nil {
			return fmt.Errorf("append to spool: %w", err)
		}
		if newSeg {
			return syncDir(s.dir, s.opts.Sync)
		}
	case SyncPeriodic:
		s.w.dirty = true
	}
	return nil
}

// rotate seals the active segment and starts the next one.
func (s *Spool) rotate() error {
	old := s.w.f
	if s.opts.Sync != SyncNever {
		// A sealed segment is never synced again. (Under SyncPeriodic the
		// background sync may be running on old right now without holding
		// wmu, so don't trust the dirty flag.)
		if err := old.Sync(); err != nil {
			return fmt.Errorf("append to spool: seal segment: %w", err)
		}
	}
	f, err := s.createSegment(s.w.seq + 1)
	if err != nil {
		return err
	}
	if err := old.Close(); err != nil {
		s.log.Warn("cannot close spool segment", "file", old.Name(), "err", err)
	}
	s.w.f, s.w.seq, s.w.size, s.w.dirty = f, s.w.seq+1, segHeaderLen, s.opts.Sync == SyncPeriodic
	return nil
}

// publish makes appended records visible to the consumer, then enforces
// MaxBytes by dropping the oldest segments.
func (s *Spool) publish(pub []published) {
	s.mu.Lock()
	added := int64(0)
	for _, p := range pub {
		if p.isNew {
			s.segs = append(s.segs, &segment{seq: p.seq, size: p.size, disk: p.size, records: p.records, fr: framingV2})
			s.diskBytes += p.size
		} else {
			last := s.segs[len(s.segs)-1]
			s.diskBytes += p.size - last.disk
			last.size, last.disk = p.size, p.size
			last.records += p.records
		}
		s.totalRecords += p.records
		added += p.records
	}
	var (
		dropped               []*segment
		lostRecs, lostBytes   int64
		totalRecs, totalBytes int64
	)
	for s.diskBytes > s.opts.MaxBytes && len(s.segs) > 1 {
		g := s.segs[0] // == pos.seq
		lostRecs += g.records - s.consumed
		lostBytes += max(g.size-s.pos.off, 0)
		s.dropFrontLocked()
		dropped = append(dropped, g)
		s.pos = position{seq: s.segs[0].seq, off: segHeaderLen}
		s.consumed = 0
	}
	if len(dropped) > 0 {
		s.stats.DroppedRecords += lostRecs
		s.stats.DroppedBytes += lostBytes
		totalRecs, totalBytes = s.stats.DroppedRecords, s.stats.DroppedBytes
	}
	if added > 0 {
		s.wakeLocked()
	}
	s.mu.Unlock()
	if len(dropped) > 0 {
		s.removeSegments(dropped)
		if lostRecs > 0 {
			s.log.Warn("spool is over its size limit; dropped the oldest unsent records",
				"dropped_records", lostRecs, "dropped_bytes", lostBytes, "segments", len(dropped),
				"max_bytes", s.opts.MaxBytes, "dropped_records_total", totalRecs, "dropped_bytes_total", totalBytes)
		}
	}
}
