package agent

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/spool"
)

// logReplay says, right after a spool opened, what the previous run left
// in it to replay: records, bytes, segments and, for results, the age of
// the oldest; and whether that run ended in the middle of a write or left
// damaged records (the spool logs each with its file and offset).
func (a *Agent) logReplay(name, dir string, sp *spool.Spool) {
	st := sp.Stats()
	attrs := []any{"spool", name, "dir", dir, "records", st.PendingRecords, "bytes", st.PendingBytes, "segments", st.Segments}
	if name == "results" && st.PendingRecords > 0 {
		if b, err := sp.Peek(1, 0); err == nil && b.Len() == 1 {
			// Peek without Ack: the sender gets the same record first.
			var e unyov1.Event
			if proto.Unmarshal(b.Records[0], &e) == nil && e.GetStartedAt() != nil {
				attrs = append(attrs, "oldest_age", time.Since(e.GetStartedAt().AsTime()).Round(time.Second).String())
			}
		}
	}
	if st.TruncatedBytes > 0 {
		attrs = append(attrs, "torn_tail_bytes", st.TruncatedBytes)
		a.log.Warn("the previous run ended in the middle of writing to the spool (killed or crashed); cut the incomplete record and replaying the rest", attrs...)
		return
	}
	if st.Corruptions > 0 {
		attrs = append(attrs, "damaged_regions", st.Corruptions, "damaged_bytes", st.SkippedBytes)
		a.log.Warn("the spool holds damaged records, which are skipped; replaying the intact ones", attrs...)
		return
	}
	if st.PendingRecords > 0 {
		a.log.Info("replaying records spooled by the previous run", attrs...)
		return
	}
	a.log.Info("the spool is empty; nothing to replay", "spool", name, "dir", dir)
}
