package cluster_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// The controller's retention loop drops audit records past audit.retention.
func TestAuditRetention(t *testing.T) {
	ctx := t.Context()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	cl := cluster.New(st, cluster.Options{Name: "c1", Replica: "r1", AuditRetention: 30 * 24 * time.Hour,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for i, age := range []time.Duration{31 * 24 * time.Hour, 29 * 24 * time.Hour, time.Hour} {
		if err := st.AppendAudit(ctx, &unyov1.AuditRecord{Id: string(rune('a' + i)), At: timestamppb.New(now.Add(-age)), Who: "alice", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	cluster.PruneLogs(cl, ctx)
	left, err := st.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[1].GetId() != "b" {
		t.Errorf("after the retention loop: %v, want the records of 29 days and 1 hour ago", left)
	}
}
