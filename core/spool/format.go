package spool

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// On-disk layout of a spool directory:
//
//	00000000000000000001.seg   segments, named by a 20-digit sequence number
//	00000000000000000002.seg
//	position                   read position: (segment, offset) of the oldest unacked record
//	lock                       flock'ed while a Spool has the directory open
//
// A segment is an 8-byte header ("USPL", format version, 3 zero bytes)
// followed by records:
//
//	length  uint32 little endian   payload length
//	crc     uint32 little endian   CRC-32C of the 4 length bytes and the payload
//	payload [length]byte
//
// The CRC covers the length so that a zero-filled or bit-flipped header is
// caught, not just a damaged payload.
const (
	segHeaderLen    = 8
	recordHeaderLen = 8
	formatVersion   = 1

	segSuffix     = ".seg"
	segNameLen    = 20 + len(segSuffix)
	posFileName   = "position"
	posSlotLen    = 36
	posSlotStride = 4096
)

var (
	segMagic = [4]byte{'U', 'S', 'P', 'L'}
	posMagic = [4]byte{'U', 'S', 'P', 'P'}
	// castagnoli is read-only after init; crc32 caches the table internally anyway.
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

func segHeader() []byte {
	return []byte{segMagic[0], segMagic[1], segMagic[2], segMagic[3], formatVersion, 0, 0, 0}
}

func segName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, segSuffix) }

// parseSegName returns the sequence number of a segment file name.
func parseSegName(name string) (uint64, bool) {
	if len(name) != segNameLen || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	seq, err := strconv.ParseUint(name[:20], 10, 64)
	if err != nil || seq == 0 {
		return 0, false
	}
	return seq, true
}

func recordCRC(hdr []byte, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, hdr[:4]), castagnoli, payload)
}

// appendRecord appends the framed record to buf. The header is written in
// place (a local array would escape through the crc32 call and allocate).
func appendRecord(buf, payload []byte) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = append(buf, 0, 0, 0, 0)
	buf = append(buf, payload...)
	binary.LittleEndian.PutUint32(buf[start+4:], recordCRC(buf[start:start+4], buf[start+recordHeaderLen:]))
	return buf
}

// position is where the oldest unacknowledged record starts.
type position struct {
	seq uint64
	off int64
}

func (p position) less(q position) bool {
	return p.seq < q.seq || (p.seq == q.seq && p.off < q.off)
}

// The position file has two slots, written alternately in place:
//
//	magic "USPP", version, 3 zero bytes, counter uint64, seq uint64,
//	offset uint64, CRC-32C of the preceding 32 bytes
//
// Open takes the valid slot with the higher counter. A write torn by a crash
// damages only the slot being written, so the other one still holds the
// previous position (resending a batch is allowed; losing the position
// would resend everything). The slots are a page apart so that one torn
// page write cannot hit both. Writing in place, rather than temp file and
// rename, keeps Ack to one pwrite (plus fdatasync under SyncAlways) with
// no directory update.
func encodePosition(p position, counter uint64) []byte {
	b := make([]byte, posSlotLen)
	copy(b, posMagic[:])
	b[4] = formatVersion
	binary.LittleEndian.PutUint64(b[8:], counter)
	binary.LittleEndian.PutUint64(b[16:], p.seq)
	binary.LittleEndian.PutUint64(b[24:], uint64(p.off))
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

func decodePosition(b []byte) (p position, counter uint64, ok bool) {
	if len(b) < posSlotLen || !bytes.Equal(b[:4], posMagic[:]) || b[4] != formatVersion ||
		binary.LittleEndian.Uint32(b[32:]) != crc32.Checksum(b[:32], castagnoli) {
		return position{}, 0, false
	}
	counter = binary.LittleEndian.Uint64(b[8:])
	p = position{seq: binary.LittleEndian.Uint64(b[16:]), off: int64(binary.LittleEndian.Uint64(b[24:]))}
	if p.seq == 0 || p.off < segHeaderLen {
		return position{}, 0, false
	}
	return p, counter, true
}

func posSlotOffset(counter uint64) int64 { return int64(counter%2) * posSlotStride }

// readPosition opens (creating if needed) the position file and returns the
// latest valid position in it; ok is false if there is none. corrupt reports
// a non-empty file without a valid slot.
func readPosition(dir string) (f *os.File, p position, counter uint64, ok, corrupt bool, err error) {
	path := filepath.Join(dir, posFileName)
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, position{}, 0, false, false, fmt.Errorf("open spool position file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, position{}, 0, false, false, fmt.Errorf("open spool position file: %w", err)
	}
	buf := make([]byte, posSlotLen)
	for slot := range int64(2) {
		n, err := f.ReadAt(buf, slot*posSlotStride)
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, position{}, 0, false, false, fmt.Errorf("read spool position file: %w", err)
		}
		if sp, c, valid := decodePosition(buf[:n]); valid && (!ok || c > counter) {
			p, counter, ok = sp, c, true
		}
	}
	return f, p, counter, ok, !ok && fi.Size() > 0, nil
}

// scanResult describes the records of one segment from a start offset on.
type scanResult struct {
	records  int64
	validEnd int64 // offset just after the last valid record
	size     int64 // file size
	corrupt  bool  // bytes after validEnd are not a valid record
}

// scanRecords walks the records of f from off to size, checking each CRC.
// It stops at the first record that is truncated, oversized or fails its CRC.
func scanRecords(f *os.File, off, size int64) (scanResult, error) {
	res := scanResult{validEnd: off, size: size}
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), 256<<10)
	var hdr [recordHeaderLen]byte
	var payload []byte
	for res.validEnd < size {
		if size-res.validEnd < recordHeaderLen {
			res.corrupt = true
			return res, nil
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return res, fmt.Errorf("read %s at offset %d: %w", f.Name(), res.validEnd, err)
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n > MaxRecordBytes || int64(n) > size-res.validEnd-recordHeaderLen {
			res.corrupt = true
			return res, nil
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return res, fmt.Errorf("read %s at offset %d: %w", f.Name(), res.validEnd, err)
		}
		if binary.LittleEndian.Uint32(hdr[4:]) != recordCRC(hdr[:], payload) {
			res.corrupt = true
			return res, nil
		}
		res.records++
		res.validEnd += recordHeaderLen + int64(n)
	}
	return res, nil
}
