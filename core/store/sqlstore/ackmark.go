package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"time"
)

// The acknowledged-events mark is a small file, outside the database, that
// records the highest event sequence number the store has committed and
// so acknowledged to agents. A store that comes back below it (a zeroed
// or deleted WAL, a restored old backup, a rolled-back replica) has lost
// events that agents were told were stored and removed from their spools;
// TrackAcked finds that at start.
//
// The file has two slots, written alternately in place (as the agent
// spool's position file): magic "UACK", version, 3 zero bytes, counter
// uint64, sequence uint64, CRC-32C of the preceding 24 bytes. A torn write
// damages only the slot being written.
//
// Writing it is one pwrite per committed group (see groupCommit), without
// fsync; it is fdatasynced at most once per markSyncEvery, and at Close. It
// therefore survives a crash of the process at once, and a power loss
// within markSyncEvery.
const (
	markSlotLen    = 36
	markSlotStride = 4096
	markVersion    = 1
	markSyncEvery  = time.Second
)

var markMagic = [4]byte{'U', 'A', 'C', 'K'}

// ackMark is the open mark file.
type ackMark struct {
	path string

	mu       sync.Mutex
	f        *os.File
	counter  uint64 // of the slot holding seq
	seq      int64
	lastSync time.Time
	err      error // the last write failure, until a write succeeds
}

func encodeMark(seq int64, counter uint64) []byte {
	b := make([]byte, markSlotLen)
	copy(b, markMagic[:])
	b[4] = markVersion
	binary.LittleEndian.PutUint64(b[8:], counter)
	binary.LittleEndian.PutUint64(b[16:], uint64(seq))
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], castagnoli))
	return b
}

func decodeMark(b []byte) (seq int64, counter uint64, ok bool) {
	if len(b) < markSlotLen || !bytes.Equal(b[:4], markMagic[:]) || b[4] != markVersion ||
		binary.LittleEndian.Uint32(b[24:]) != crc32.Checksum(b[:24], castagnoli) {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(b[16:])), binary.LittleEndian.Uint64(b[8:]), true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openMark opens (creating) the mark file at path and reads the latest
// valid slot; found is false for a new or unreadable file.
func openMark(path string) (m *ackMark, found bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("open the acknowledged-events mark: %w", err)
	}
	m = &ackMark{path: path, f: f, lastSync: time.Now()}
	buf := make([]byte, markSlotLen)
	for slot := range int64(2) {
		n, err := f.ReadAt(buf, slot*markSlotStride)
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, false, fmt.Errorf("read the acknowledged-events mark %s: %w", path, err)
		}
		if seq, c, ok := decodeMark(buf[:n]); ok && (!found || c > m.counter) {
			m.seq, m.counter, found = seq, c, true
		}
	}
	return m, found, nil
}

// set records seq if it is above the mark. sync forces an fdatasync.
func (m *ackMark) set(seq int64, sync bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seq <= m.seq && !sync {
		return nil
	}
	c := m.counter + 1
	if _, err := m.f.WriteAt(encodeMark(max(seq, m.seq), c), int64(c%2)*markSlotStride); err != nil {
		m.err = fmt.Errorf("record acknowledged events in %s: %w", m.path, err)
		return m.err
	}
	m.counter, m.seq = c, max(seq, m.seq)
	if sync || time.Since(m.lastSync) >= markSyncEvery {
		if err := m.f.Sync(); err != nil {
			m.err = fmt.Errorf("record acknowledged events in %s: %w", m.path, err)
			return m.err
		}
		m.lastSync = time.Now()
	}
	m.err = nil
	return nil
}

// reset overwrites the mark with seq, even if lower, and syncs it.
func (m *ackMark) reset(seq int64) error {
	m.mu.Lock()
	m.seq = seq
	m.mu.Unlock()
	return m.set(seq, true)
}

func (m *ackMark) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *ackMark) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.f.Sync()
	return errors.Join(err, m.f.Close())
}

// AckCheck is what TrackAcked found.
type AckCheck struct {
	// Path is the mark file.
	Path string
	// New is true when there was no mark yet (first start with it).
	New bool
	// Acked is the highest event sequence number acknowledged before, by
	// the mark; Stored the highest the store holds.
	Acked, Stored int64
}

// Missing is how many acknowledged events the store lost, at most: the
// sequence numbers between Stored and Acked (a resent duplicate also
// takes a number, so a few of them may never have been events).
func (c AckCheck) Missing() int64 { return max(c.Acked-c.Stored, 0) }

// TrackAcked opens the acknowledged-events mark at path, compares it with
// the store, and from then on advances it with every committed append.
// When the store came back below the mark (Missing() > 0), the store's
// sequence is moved up to the mark, so that numbers are never reused and
// the loss is reported once; the caller says so loudly.
func (s *Store) TrackAcked(ctx context.Context, path string) (AckCheck, error) {
	m, found, err := openMark(path)
	if err != nil {
		return AckCheck{}, err
	}
	var stored int64
	if err := s.w.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'event_seq'").Scan(&stored); err != nil {
		m.close()
		return AckCheck{}, fmt.Errorf("read the store's event sequence: %w", err)
	}
	check := AckCheck{Path: path, New: !found, Acked: m.seq, Stored: stored}
	if check.Missing() > 0 {
		if err := s.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE counters SET value = $1 WHERE name = 'event_seq' AND value < $1", m.seq)
			return err
		}); err != nil {
			m.close()
			return check, fmt.Errorf("move the store's event sequence up to the acknowledged mark: %w", err)
		}
	} else if err := m.reset(stored); err != nil {
		m.close()
		return check, err
	}
	if old := s.mark.Swap(m); old != nil {
		old.close()
	}
	return check, nil
}

// markAcked advances the mark, if tracked, past a committed append whose
// last sequence number is seq. A failure shows in Health, not in the
// append: the events are committed.
func (s *Store) markAcked(seq int64) {
	if m := s.mark.Load(); m != nil {
		_ = m.set(seq, false)
	}
}
