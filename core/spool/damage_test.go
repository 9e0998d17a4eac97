package spool

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// logBuffer returns a logger writing text lines to the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

// TestDamagedRecordIsSkippedAloneAndNamed: one damaged record in the middle
// of a segment costs that record only, and the log names the file, the
// offset, the length and what was wrong, not a crash during append.
func TestDamagedRecordIsSkippedAloneAndNamed(t *testing.T) {
	const size = 100
	recOff := func(k int) int64 { return int64(segHeaderLen + k*(recordHeaderLen+size)) }
	for _, tc := range []struct {
		name  string
		off   int64 // byte of record 3 to flip
		found string
	}{
		{"payload", recOff(3) + recordHeaderLen + 10, "checksum mismatch"},
		{"crc", recOff(3) + 9, "checksum mismatch"},
		{"marker", recOff(3), "no record marker where a record should start"},
		{"length", recOff(3) + 7, "impossible record length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, Options{Dir: dir})
			for i := range 8 {
				if err := s.Append(rec(i, size)); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			path := segFiles(t, dir)[0]
			flipByteMask(t, path, tc.off, 0x80)
			log, logs := logBuffer()
			s = open(t, Options{Dir: dir, Logger: log})
			if got := drain(t, s, 0, 0); !slices.Equal(got, without(seq(0, 8), 3)) {
				t.Fatalf("got %v, want every record but 3", got)
			}
			st := s.Stats()
			if st.Corruptions != 1 || st.SkippedBytes != recordHeaderLen+size || st.TruncatedBytes != 0 {
				t.Fatalf("stats: %+v", st)
			}
			line := logs.String()
			for _, want := range []string{
				"skipped it and resumed at the next intact record", "file=" + path,
				fmt.Sprintf("offset=%d", recOff(3)), fmt.Sprintf("bytes=%d", recordHeaderLen+size),
				fmt.Sprintf("found=%q", tc.found), fmt.Sprintf("resumed_at=%d", recOff(4)),
			} {
				if !strings.Contains(line, want) {
					t.Errorf("log does not say %q:\n%s", want, line)
				}
			}
			if strings.Contains(line, "crash") || strings.Contains(line, "middle of writing") {
				t.Errorf("log blames a crash for damage mid-segment:\n%s", line)
			}
		})
	}
}

// TestTornTailIsNamedAsAnInterruptedWrite: an append cut short at the end
// of the newest segment is truncated and logged as the previous run ending
// mid-write.
func TestTornTailIsNamedAsAnInterruptedWrite(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	appendRange(t, s, 0, 5, 1)
	s.Close()
	path := segFiles(t, dir)[0]
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	log, logs := logBuffer()
	s = open(t, Options{Dir: dir, Logger: log})
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(0, 4)) {
		t.Fatalf("got %v", got)
	}
	if st := s.Stats(); st.TruncatedBytes == 0 || st.Corruptions != 0 {
		t.Fatalf("stats: %+v", st)
	}
	if l := logs.String(); !strings.Contains(l, "ended in the middle of writing") || !strings.Contains(l, "file="+path) {
		t.Fatalf("log: %s", l)
	}
}

// appendV1Record frames payload as format version 1 did: length, CRC, payload.
func appendV1Record(buf, payload []byte) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = append(buf, 0, 0, 0, 0)
	buf = append(buf, payload...)
	binary.LittleEndian.PutUint32(buf[start+4:], recordCRC(buf[start:start+4], buf[start+8:]))
	return buf
}

// TestReadsVersion1Segments: segments written before record markers are
// read in order; new records go to a new segment in the current format.
func TestReadsVersion1Segments(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged=%v", damaged), func(t *testing.T) {
			dir := t.TempDir()
			for k, from := range []int{0, 5} {
				seg := []byte{'U', 'S', 'P', 'L', 1, 0, 0, 0}
				for i := from; i < from+5; i++ {
					seg = appendV1Record(seg, rec(i, 50))
				}
				if err := os.WriteFile(filepath.Join(dir, segName(uint64(k+1))), seg, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want := seq(0, 10)
			if damaged {
				// Version 1 has no markers: the rest of that segment is lost.
				flipByteMask(t, filepath.Join(dir, segName(1)), segHeaderLen+2*(8+50)+20, 0x10)
				want = append(seq(0, 2), seq(5, 10)...)
			}
			s := open(t, Options{Dir: dir})
			appendRange(t, s, 10, 13, 1)
			want = append(want, seq(10, 13)...)
			if got := drain(t, s, 4, 0); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			files := segFiles(t, dir)
			hdr := make([]byte, segHeaderLen)
			f, err := os.Open(files[len(files)-1])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.ReadAt(hdr, 0); err != nil || segVersion(hdr) != formatVersion {
				t.Fatalf("newest segment %s has header %v (%v), want version %d", files[len(files)-1], hdr, err, formatVersion)
			}
		})
	}
}

func flipByteMask(t *testing.T, path string, off int64, mask byte) {
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
	b[0] ^= mask
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestPositionSlotsAreReserved: Open gives the position file room for both
// slots, so that acknowledging works on a disk that has since filled up.
func TestPositionSlotsAreReserved(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	s.Close()
	fi, err := os.Stat(filepath.Join(dir, posFileName))
	if err != nil || fi.Size() != posSlotStride+posSlotLen {
		t.Fatalf("position file: %v, %v", fi, err)
	}
}
