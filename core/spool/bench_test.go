package spool

import (
	"fmt"
	"testing"
)

const benchRecordBytes = 300

func benchRecords(n int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = rec(i, benchRecordBytes)
	}
	return recs
}

func reportRate(b *testing.B, records int) {
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppend measures Append alone; MB/s counts payload bytes. The
// default MaxBytes applies, so long runs include dropping old segments.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []SyncPolicy{SyncAlways, SyncPeriodic, SyncNever} {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("sync=%v/batch=%d", sync, batch), func(b *testing.B) {
				s := open(b, Options{Dir: b.TempDir(), Sync: sync})
				recs := benchRecords(batch)
				b.SetBytes(int64(batch * benchRecordBytes))
				b.ResetTimer()
				for b.Loop() {
					if err := s.Append(recs...); err != nil {
						b.Fatal(err)
					}
				}
				reportRate(b, b.N*batch)
			})
		}
	}
}

// BenchmarkAppendPeekAck measures the full cycle of one batch: Append, Peek,
// Ack (which persists the read position and deletes finished segments).
// With lazy acks (the agent's outboxes) only the Append is synced.
func BenchmarkAppendPeekAck(b *testing.B) {
	for _, o := range []Options{{Sync: SyncAlways}, {Sync: SyncAlways, LazyAcks: true}, {Sync: SyncNever}} {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("sync=%v/lazyacks=%t/batch=%d", o.Sync, o.LazyAcks, batch), func(b *testing.B) {
				o.Dir = b.TempDir()
				s := open(b, o)
				recs := benchRecords(batch)
				b.SetBytes(int64(batch * benchRecordBytes))
				b.ResetTimer()
				for b.Loop() {
					if err := s.Append(recs...); err != nil {
						b.Fatal(err)
					}
					bt, err := s.Peek(batch, 0)
					if err != nil || bt.Len() != batch {
						b.Fatalf("Peek: %d records, %v", bt.Len(), err)
					}
					if err := s.Ack(bt); err != nil {
						b.Fatal(err)
					}
				}
				reportRate(b, b.N*batch)
			})
		}
	}
}

// BenchmarkDrainBacklog measures replaying a backlog: Peek and Ack of
// batches of 500 records from a spool that has 64 MiB pending.
func BenchmarkDrainBacklog(b *testing.B) {
	dir := b.TempDir()
	opts := Options{Dir: dir, Sync: SyncNever}
	s := open(b, opts)
	const backlog = 64 << 20 / (benchRecordBytes + recordHeaderLen)
	recs := benchRecords(1000)
	for i := 0; i < backlog; i += len(recs) {
		if err := s.Append(recs...); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(500 * benchRecordBytes)
	b.ResetTimer()
	n := 0
	for b.Loop() {
		bt, err := s.Peek(500, 0)
		if err != nil {
			b.Fatal(err)
		}
		if bt.Len() == 0 {
			b.StopTimer()
			for i := 0; i < backlog; i += len(recs) {
				s.Append(recs...)
			}
			b.StartTimer()
			continue
		}
		n += bt.Len()
		if err := s.Ack(bt); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, n)
}

// BenchmarkOpen measures recovery (a CRC scan of every pending record) with
// 64 MiB pending.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	opts := Options{Dir: dir, Sync: SyncNever, Logger: quietLogger()}
	s := open(b, opts)
	recs := benchRecords(1000)
	for i := 0; i < 64<<20/(benchRecordBytes+recordHeaderLen); i += len(recs) {
		if err := s.Append(recs...); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	b.SetBytes(64 << 20)
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
