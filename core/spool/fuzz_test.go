package spool

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecover damages a spool on disk (bit flips, truncation) and checks
// that Open recovers and that what can be read is a subsequence of what
// was written, in order, after which the spool works normally.
func FuzzRecover(f *testing.F) {
	f.Add([]byte("records of various lengths"), uint16(3), uint32(100), uint8(0), uint32(0), false)
	f.Add([]byte{0, 1, 2, 3, 200, 255, 7}, uint16(0), uint32(0), uint8(7), uint32(50), true)
	f.Add([]byte("x"), uint16(40), uint32(9), uint8(3), uint32(1<<20), true)
	f.Fuzz(func(t *testing.T, data []byte, acks uint16, flipAt uint32, flipBit uint8, cutAt uint32, runtime bool) {
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentBytes: minSegmentBytes, Sync: SyncNever, Logger: quietLogger()}
		s, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { s.Close() }()
		// Record i: its index, then a slice of data whose length depends on i.
		const n = 60
		var written [][]byte
		for i := range n {
			r := binary.BigEndian.AppendUint32(nil, uint32(i))
			if len(data) > 0 {
				r = append(r, data[:(i*31)%(len(data)+1)]...)
			}
			written = append(written, r)
			if err := s.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		next := 0 // index of the oldest unacked record
		for range int(acks % 8) {
			b, err := s.Peek(int(acks%5)+1, 0)
			if err != nil {
				t.Fatal(err)
			}
			next += b.Len()
			if err := s.Ack(b); err != nil {
				t.Fatal(err)
			}
		}
		damage := func() {
			segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			if len(segs) == 0 {
				t.Fatal("no segments")
			}
			path := segs[int(flipAt)%len(segs)]
			if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
				f, _ := os.OpenFile(path, os.O_RDWR, 0)
				b := make([]byte, 1)
				off := int64(flipAt/7) % fi.Size()
				f.ReadAt(b, off)
				b[0] ^= 1 << (flipBit % 8)
				f.WriteAt(b, off)
				f.Close()
			}
			// Truncation is a crash artifact, seen only by Open; truncating
			// under a running writer is not a failure mode we model.
			if cutAt%3 == 0 && !runtime {
				last := segs[len(segs)-1]
				if fi, err := os.Stat(last); err == nil {
					os.Truncate(last, int64(cutAt)%(fi.Size()+1))
				}
			}
		}
		if runtime {
			damage()
		} else {
			s.Close()
			damage()
			if s, err = Open(opts); err != nil {
				t.Fatalf("Open after damage: %v", err)
			}
		}
		last := next - 1
		check := func(rs [][]byte) {
			for _, r := range rs {
				if len(r) < 4 {
					t.Fatalf("record of %d bytes", len(r))
				}
				i := int(binary.BigEndian.Uint32(r))
				if i <= last || i >= n+10 {
					t.Fatalf("record %d after %d", i, last)
				}
				if i < n && string(r) != string(written[i]) {
					t.Fatalf("record %d content differs", i)
				}
				last = i
			}
		}
		for {
			b, err := s.Peek(7, 0)
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() == 0 {
				break
			}
			check(b.Records)
			if err := s.Ack(b); err != nil {
				t.Fatal(err)
			}
		}
		if st := s.Stats(); st.PendingRecords != 0 {
			t.Fatalf("nothing readable but stats say %+v", st)
		}
		checkInvariants(t, s)
		// Appends continue cleanly after recovery.
		last = n - 1
		for i := n; i < n+10; i++ {
			if err := s.Append(binary.BigEndian.AppendUint32(nil, uint32(i))); err != nil {
				t.Fatal(err)
			}
		}
		b, err := s.Peek(0, 0)
		if err != nil || b.Len() != 10 {
			t.Fatalf("after recovery: %d records, %v", b.Len(), err)
		}
		check(b.Records)
	})
}

// FuzzOpenGarbage opens a directory whose segment and position files hold
// arbitrary bytes: Open must not fail or panic, and reading must terminate.
func FuzzOpenGarbage(f *testing.F) {
	valid := append(segHeader(), appendRecord(nil, []byte("hello"))...)
	f.Add(valid, []byte{}, false)
	f.Add(valid[:11], encodePosition(position{seq: 1, off: 8}, 1), true)
	f.Add([]byte("USPL\x01\x00\x00\x00\xff\xff\xff\xff"), []byte("junk"), true)
	// A damaged record between two intact ones, and a version 1 segment.
	damaged := appendRecord(appendRecord(appendRecord(segHeader(), []byte("one")), []byte("two")), []byte("three"))
	damaged[segHeaderLen+recordHeaderLen+3+recordHeaderLen] ^= 1
	f.Add(damaged, []byte{}, true)
	f.Add([]byte("USPL\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00one"), []byte{}, false)
	f.Fuzz(func(t *testing.T, seg, pos []byte, two bool) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o600)
		if two {
			os.WriteFile(filepath.Join(dir, segName(2)), seg, 0o600)
		}
		os.WriteFile(filepath.Join(dir, posFileName), pos, 0o600)
		s, err := Open(Options{Dir: dir, SegmentBytes: minSegmentBytes, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for range 1000 {
			b, err := s.Peek(3, 0)
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() == 0 {
				break
			}
			if err := s.Ack(b); err != nil {
				t.Fatal(err)
			}
		}
		if st := s.Stats(); st.PendingRecords != 0 {
			t.Fatalf("stats: %+v", st)
		}
		checkInvariants(t, s)
		if err := s.Append([]byte("after")); err != nil {
			t.Fatal(err)
		}
		if b, _ := s.Peek(0, 0); b.Len() != 1 || string(b.Records[0]) != "after" {
			t.Fatalf("append after garbage: %q", b.Records)
		}
	})
}
