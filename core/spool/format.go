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
// followed by records. Format version 2 (written now) frames a record as
//
//	marker  [4]byte                  recordMarker, where a record starts
//	length  uint32 little endian     payload length
//	crc     uint32 little endian     CRC-32C of the 4 length bytes and the payload
//	payload [length]byte
//
// Version 1 (read, never written) has no marker. The CRC covers the length
// so that a zero-filled or bit-flipped header is caught, not just a damaged
// payload. The marker lets a reader that meets a damaged record find the
// next intact one (resynchronise) instead of giving up on the rest of the
// segment: it searches for the marker and accepts a frame whose checksum
// holds.
const (
	segHeaderLen    = 8
	recordHeaderLen = 12 // version 2
	formatVersion   = 2

	segSuffix     = ".seg"
	segNameLen    = 20 + len(segSuffix)
	posFileName   = "position"
	posSlotLen    = 36
	posSlotStride = 4096
	// posVersion is the position file's format, unchanged since version 1.
	posVersion = 1
)

var (
	segMagic = [4]byte{'U', 'S', 'P', 'L'}
	posMagic = [4]byte{'U', 'S', 'P', 'P'}
	// recordMarker starts every version 2 record; bytes unlikely in text or
	// small integers, so that a search rarely stops on payload.
	recordMarker = [4]byte{0xF7, 'R', 'E', 0xC5}
	// castagnoli is read-only after init; crc32 caches the table internally anyway.
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

func segHeader() []byte {
	return []byte{segMagic[0], segMagic[1], segMagic[2], segMagic[3], formatVersion, 0, 0, 0}
}

// segVersion returns the format version of a segment header, or 0 if hdr
// is not one.
func segVersion(hdr []byte) byte {
	if len(hdr) < segHeaderLen || !bytes.Equal(hdr[:4], segMagic[:]) || hdr[5] != 0 || hdr[6] != 0 || hdr[7] != 0 {
		return 0
	}
	if v := hdr[4]; v == 1 || v == formatVersion {
		return v
	}
	return 0
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

func recordCRC(lenBytes []byte, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, lenBytes[:4]), castagnoli, payload)
}

// appendRecord appends the framed record (version 2) to buf. The header is
// written in place (a local array would escape through the crc32 call and
// allocate).
func appendRecord(buf, payload []byte) []byte {
	start := len(buf)
	buf = append(buf, recordMarker[:]...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = append(buf, 0, 0, 0, 0)
	buf = append(buf, payload...)
	binary.LittleEndian.PutUint32(buf[start+8:], recordCRC(buf[start+4:start+8], buf[start+recordHeaderLen:]))
	return buf
}

// framing is how the records of one segment version are laid out.
type framing struct {
	hdrLen int64
	marker bool // records start with recordMarker, so a reader can resynchronise
}

var (
	framingV1 = framing{hdrLen: 8}
	framingV2 = framing{hdrLen: recordHeaderLen, marker: true}
)

func framingOf(version byte) framing {
	if version == 1 {
		return framingV1
	}
	return framingV2
}

// damage says what is wrong with the bytes where a record should start.
type damage int

const (
	frameOK     damage = iota
	frameShort         // buf ends before the frame does: read more
	badMarker          // no record marker
	badLength          // a length over MaxRecordBytes
	pastEnd            // the record runs past the end of the segment
	badChecksum        // the CRC does not match
)

func (d damage) String() string {
	switch d {
	case badMarker:
		return "no record marker where a record should start"
	case badLength:
		return "impossible record length"
	case pastEnd:
		return "the segment ends inside the record (truncated)"
	case badChecksum:
		return "checksum mismatch"
	}
	return "intact"
}

// check looks at the frame at the start of buf; rest is how many bytes the
// segment has from there on. It returns the frame's total size (header and
// payload) once known.
func (fr framing) check(buf []byte, rest int64) (total int64, d damage) {
	if rest < fr.hdrLen {
		return 0, pastEnd
	}
	if int64(len(buf)) < fr.hdrLen {
		return 0, frameShort
	}
	lenAt := int64(0)
	if fr.marker {
		if !bytes.Equal(buf[:4], recordMarker[:]) {
			return 0, badMarker
		}
		lenAt = 4
	}
	n := binary.LittleEndian.Uint32(buf[lenAt:])
	if n > MaxRecordBytes {
		return 0, badLength
	}
	total = fr.hdrLen + int64(n)
	if total > rest {
		return total, pastEnd
	}
	if int64(len(buf)) < total {
		return total, frameShort
	}
	if binary.LittleEndian.Uint32(buf[lenAt+4:]) != recordCRC(buf[lenAt:lenAt+4], buf[fr.hdrLen:total]) {
		return total, badChecksum
	}
	return total, frameOK
}

// region is a damaged stretch of a segment, [at, next), that readers skip.
// next is where the following intact record starts, or the end of the
// segment if none does.
type region struct {
	at, next int64
	why      damage
}

// resync returns where the first intact record of f after offset from (and
// before end) starts, or end if there is none. Only segments with record
// markers can be resynchronised; for others it returns end.
func (fr framing) resync(f *os.File, from, end int64) (int64, error) {
	if !fr.marker {
		return end, nil
	}
	const window = 64 << 10
	buf := make([]byte, window)
	for off := from; off < end; {
		n, err := f.ReadAt(buf[:min(int64(window), end-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read %s at offset %d: %w", f.Name(), off, err)
		}
		if n == 0 {
			return end, nil
		}
		chunk := buf[:n]
		for i := 0; ; {
			j := bytes.Index(chunk[i:], recordMarker[:])
			if j < 0 {
				break
			}
			at := off + int64(i+j)
			ok, err := fr.validAt(f, at, end)
			if err != nil {
				return 0, err
			}
			if ok {
				return at, nil
			}
			i += j + 1
		}
		if off+int64(n) >= end {
			break
		}
		// Overlap so that a marker split across windows is found.
		off += int64(n) - int64(len(recordMarker)-1)
	}
	return end, nil
}

// validAt reports whether an intact record starts at off.
func (fr framing) validAt(f *os.File, off, end int64) (bool, error) {
	hdr := make([]byte, fr.hdrLen)
	if _, err := f.ReadAt(hdr, off); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("read %s at offset %d: %w", f.Name(), off, err)
	}
	total, d := fr.check(hdr, end-off)
	if d != frameShort {
		return d == frameOK, nil
	}
	buf := make([]byte, total)
	if _, err := f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("read %s at offset %d: %w", f.Name(), off, err)
	}
	_, d = fr.check(buf, end-off)
	return d == frameOK, nil
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
	b[4] = posVersion
	binary.LittleEndian.PutUint64(b[8:], counter)
	binary.LittleEndian.PutUint64(b[16:], p.seq)
	binary.LittleEndian.PutUint64(b[24:], uint64(p.off))
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

func decodePosition(b []byte) (p position, counter uint64, ok bool) {
	if len(b) < posSlotLen || !bytes.Equal(b[:4], posMagic[:]) || b[4] != posVersion ||
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
	if end := int64(posSlotStride + posSlotLen); fi.Size() < end {
		// Reserve both slots now, so that an Ack never needs a new block:
		// on a full disk it must still be able to move the position.
		if _, err := f.WriteAt(make([]byte, end-fi.Size()), fi.Size()); err != nil {
			f.Close()
			return nil, position{}, 0, false, false, fmt.Errorf("reserve room in the spool position file: %w", err)
		}
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
	records int64 // intact records
	lastEnd int64 // offset just after the last intact record (start if none)
	size    int64 // file size
	// damaged are the damaged regions, in order. The last one may reach
	// size: nothing intact follows it.
	damaged []region
}

func (res scanResult) regionAt(off int64) (region, bool) {
	for _, r := range res.damaged {
		if r.at == off {
			return r, true
		}
	}
	return region{}, false
}

// scanRecords walks the records of f from off to size, checking each CRC.
// At a damaged record it resynchronises on the next intact one (version 2
// segments), or gives up on the rest of the segment (version 1).
func scanRecords(f *os.File, fr framing, off, size int64) (scanResult, error) {
	res := scanResult{lastEnd: off, size: size}
	at := off
	r := bufio.NewReaderSize(io.NewSectionReader(f, at, size-at), 256<<10)
	hdr := make([]byte, fr.hdrLen)
	var frame []byte
	for at < size {
		d := pastEnd
		var total int64
		if size-at >= fr.hdrLen {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return res, fmt.Errorf("read %s at offset %d: %w", f.Name(), at, err)
			}
			total, d = fr.check(hdr, size-at)
			if d == frameShort {
				if int64(cap(frame)) < total {
					frame = make([]byte, total)
				}
				frame = frame[:total]
				copy(frame, hdr)
				if _, err := io.ReadFull(r, frame[fr.hdrLen:]); err != nil {
					return res, fmt.Errorf("read %s at offset %d: %w", f.Name(), at, err)
				}
				_, d = fr.check(frame, size-at)
			}
		}
		if d == frameOK {
			res.records++
			at += total
			res.lastEnd = at
			continue
		}
		next, err := fr.resync(f, at+1, size)
		if err != nil {
			return res, err
		}
		res.damaged = append(res.damaged, region{at: at, next: next, why: d})
		at = next
		r.Reset(io.NewSectionReader(f, at, size-at))
	}
	return res, nil
}
