package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

func tokenTests() []contractTest {
	token := func(id, name string) *unyov1.Token {
		return &unyov1.Token{Id: id, Name: name, Role: "operator", Clusters: []string{"eu"}, Kinds: []string{"Maintenance"},
			CreatedBy: "admin-token-x", CreatedAt: at(0), ExpiresAt: at(3600)}
	}
	return []contractTest{
		{"create, find by digest, list", func(t *testing.T, s store.Store) {
			must(t, s.CreateToken(ctx(t), token("id1", "ci"), "digest1"))
			must(t, s.CreateToken(ctx(t), token("id2", "alice"), "digest2"))
			got, err := s.TokenByDigest(ctx(t), "digest1")
			must(t, err)
			wantEqual(t, "token by digest", got, token("id1", "ci"))
			_, err = s.TokenByDigest(ctx(t), "nope")
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("unknown digest: %v, want ErrNotFound", err)
			}
			all, err := s.ListTokens(ctx(t))
			must(t, err)
			if len(all) != 2 || all[0].GetName() != "alice" || all[1].GetName() != "ci" {
				t.Errorf("list: %v, want alice and ci by name", all)
			}
		}},
		{"a live name is unique; revoked names can be reused", func(t *testing.T, s store.Store) {
			must(t, s.CreateToken(ctx(t), token("id1", "ci"), "digest1"))
			if err := s.CreateToken(ctx(t), token("id2", "ci"), "digest2"); !errors.Is(err, store.ErrExists) {
				t.Fatalf("second live token named ci: %v, want ErrExists", err)
			}
			when := time.Date(2025, 6, 1, 13, 0, 0, 0, time.UTC)
			rev, err := s.RevokeToken(ctx(t), "ci", when)
			must(t, err)
			wantTime(t, "revoked_at", rev.GetRevokedAt(), when)
			got, err := s.TokenByDigest(ctx(t), "digest1")
			must(t, err)
			wantTime(t, "revoked_at as read", got.GetRevokedAt(), when)
			_, err = s.RevokeToken(ctx(t), "ci", when)
			wantNotFound(t, err, "ci")
			must(t, s.CreateToken(ctx(t), token("id3", "ci"), "digest3"))
			all, err := s.ListTokens(ctx(t))
			must(t, err)
			if len(all) != 2 {
				t.Errorf("list after reuse: %d tokens, want the revoked and the new one", len(all))
			}
		}},
		{"touch records the last use", func(t *testing.T, s store.Store) {
			must(t, s.CreateToken(ctx(t), token("id1", "ci"), "digest1"))
			when := time.Date(2025, 6, 1, 14, 0, 0, 0, time.UTC)
			must(t, s.TouchToken(ctx(t), "id1", when))
			must(t, s.TouchToken(ctx(t), "id1", when.Add(-time.Hour))) // never moves back
			got, err := s.TokenByDigest(ctx(t), "digest1")
			must(t, err)
			wantTime(t, "last_used_at", got.GetLastUsedAt(), when)
		}},
	}
}

func auditTests() []contractTest {
	rec := func(i int, who, kind string) *unyov1.AuditRecord {
		return &unyov1.AuditRecord{Id: fmt.Sprintf("r%02d", i), At: at(i), Who: who, From: "127.0.0.1:1", Procedure: "ObjectService/Apply",
			Kind: kind, Name: "disk", Cluster: "eu", Before: `{"a":1}`, After: `{"a":2}`, Outcome: "ok"}
	}
	return []contractTest{
		{"append, filter, newest first", func(t *testing.T, s store.Store) {
			for i := range 6 {
				who, kind := "alice", "Check"
				if i%2 == 1 {
					who, kind = "bob", "Maintenance"
				}
				must(t, s.AppendAudit(ctx(t), rec(i, who, kind)))
			}
			all, err := s.ListAudit(ctx(t), store.AuditFilter{})
			must(t, err)
			if len(all) != 6 || all[0].GetId() != "r05" || all[5].GetId() != "r00" {
				t.Fatalf("all: %v, want 6 newest first", auditIDs(all))
			}
			wantEqual(t, "record", all[5], rec(0, "alice", "Check"))
			cases := []struct {
				f    store.AuditFilter
				want string
			}{
				{store.AuditFilter{Who: "bob"}, "[r05 r03 r01]"},
				{store.AuditFilter{Kind: "check"}, "[r04 r02 r00]"},
				{store.AuditFilter{Since: at(3).AsTime()}, "[r05 r04 r03]"},
				{store.AuditFilter{Limit: 2}, "[r05 r04]"},
				{store.AuditFilter{Who: "alice", Since: at(1).AsTime(), Limit: 1}, "[r04]"},
			}
			for _, c := range cases {
				got, err := s.ListAudit(ctx(t), c.f)
				must(t, err)
				if fmt.Sprint(auditIDs(got)) != c.want {
					t.Errorf("filter %+v: %v, want %s", c.f, auditIDs(got), c.want)
				}
			}
		}},
		{"prune by age", func(t *testing.T, s store.Store) {
			for i := range 5 {
				must(t, s.AppendAudit(ctx(t), rec(i, "alice", "Check")))
			}
			n, err := s.PruneAudit(ctx(t), at(2).AsTime())
			must(t, err)
			if n != 2 {
				t.Errorf("pruned %d, want 2", n)
			}
			left, err := s.ListAudit(ctx(t), store.AuditFilter{})
			must(t, err)
			if fmt.Sprint(auditIDs(left)) != "[r04 r03 r02]" {
				t.Errorf("left %v", auditIDs(left))
			}
		}},
		{"many records in one call", func(t *testing.T, s store.Store) {
			recs := make([]*unyov1.AuditRecord, 450) // more than one statement's rows
			for i := range recs {
				recs[i] = rec(i, "alice", "Check")
				recs[i].Id = fmt.Sprintf("r%04d", i)
			}
			must(t, s.AppendAudit(ctx(t), recs...))
			got, err := s.ListAudit(ctx(t), store.AuditFilter{})
			must(t, err)
			if len(got) != len(recs) || got[0].GetId() != "r0449" {
				t.Errorf("%d records, the newest %q; want 450, r0449", len(got), got[0].GetId())
			}
			// One bad record stores none of its batch.
			bad := []*unyov1.AuditRecord{rec(1000, "bob", "Check"), {Id: "no-time"}}
			if err := s.AppendAudit(ctx(t), bad...); err == nil {
				t.Error("a batch with a record without a time was stored")
			}
			if got, _ := s.ListAudit(ctx(t), store.AuditFilter{Who: "bob"}); len(got) != 0 {
				t.Errorf("part of a refused batch was stored: %v", auditIDs(got))
			}
		}},
		{"a record needs an id and a time", func(t *testing.T, s store.Store) {
			if err := s.AppendAudit(ctx(t), &unyov1.AuditRecord{At: timestamppb.Now()}); err == nil {
				t.Error("a record without id was stored")
			}
		}},
	}
}

func auditIDs(rs []*unyov1.AuditRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.GetId()
	}
	return out
}
