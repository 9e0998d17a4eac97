package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// watchedTests check what a cluster's watchers read (store.Watched) and the
// peer credentials kept for them.
func watchedTests() []contractTest {
	return []contractTest{
		{"LeaseHolder", func(t *testing.T, s store.Store) {
			if h, _, err := s.LeaseHolder(ctx(t), "ctl"); err != nil || h != "" {
				t.Fatalf("holder of a lease never taken = %q, %v", h, err)
			}
			acquire(t, s, "ctl", "a", time.Minute)
			h, until, err := s.LeaseHolder(ctx(t), "ctl")
			must(t, err)
			if h != "a" || until.Before(time.Now()) {
				t.Errorf("holder = %q until %v, want a in the future", h, until)
			}
			acquire(t, s, "short", "b", time.Millisecond)
			time.Sleep(5 * time.Millisecond) // the store's clock expires it
			if h, _, err := s.LeaseHolder(ctx(t), "short"); err != nil || h != "" {
				t.Errorf("holder of an expired lease = %q, %v", h, err)
			}
		}},
		{"PipelineLag", func(t *testing.T, s store.Store) {
			lag, err := s.PipelineLag(ctx(t))
			must(t, err)
			if lag.Behind != 0 || !lag.OldestReceived.IsZero() {
				t.Fatalf("empty store: %+v", lag)
			}
			e1, e2 := event("l-1", "web1", "disk", critical, 1), event("l-2", "web1", "disk", critical, 2)
			e1.ReceivedAt, e2.ReceivedAt = at(10), at(20)
			appendEvents(t, s, 2, e1, e2)
			lag, err = s.PipelineLag(ctx(t))
			must(t, err)
			if lag.Behind != 2 || !lag.OldestReceived.Equal(at(10).AsTime()) {
				t.Fatalf("two unprocessed: %+v, want 2 behind from %v", lag, at(10).AsTime())
			}
			next, err := s.NextEvents(ctx(t), 0, 1)
			must(t, err)
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{Cursor: next[0].Seq, Decision: *pipeline.NewDecision()}))
			lag, err = s.PipelineLag(ctx(t))
			must(t, err)
			if lag.Behind != 1 || !lag.OldestReceived.Equal(at(20).AsTime()) {
				t.Fatalf("one processed: %+v, want 1 behind from %v", lag, at(20).AsTime())
			}
		}},
		{"ResultsAcceptedKeepsTheLatest", func(t *testing.T, s store.Store) {
			if got, err := s.ResultsAcceptedAt(ctx(t)); err != nil || !got.IsZero() {
				t.Fatalf("never noted: %v, %v", got, err)
			}
			must(t, s.NoteResultsAccepted(ctx(t), at(20).AsTime()))
			must(t, s.NoteResultsAccepted(ctx(t), at(10).AsTime())) // a slower replica
			got, err := s.ResultsAcceptedAt(ctx(t))
			must(t, err)
			if !got.Equal(at(20).AsTime()) {
				t.Errorf("accepted at %v, want the latest %v", got, at(20).AsTime())
			}
		}},
		{"CredentialsGeneration", func(t *testing.T, s store.Store) {
			gen := func() int64 {
				t.Helper()
				g, err := s.CredentialsGeneration(ctx(t))
				must(t, err)
				return g
			}
			// Each step changes the credentials (moved) or not.
			steps := []struct {
				what  string
				do    func() error
				moved bool
			}{
				{"put", func() error {
					return s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web1", Hash: "h1"})
				}, true},
				{"put again", func() error {
					return s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web1", Hash: "h2"})
				}, true},
				{"add", func() error {
					return s.AddCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web2", Hash: "h3"})
				}, true},
				{"add taken", func() error {
					if err := s.AddCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web2", Hash: "h4"}); !errors.Is(err, store.ErrExists) {
						return fmt.Errorf("adding a taken credential: %v, want ErrExists", err)
					}
					return nil
				}, false},
				{"lookup", func() error { _, err := s.LookupCredential(ctx(t), "h3"); return err }, false},
				{"delete", func() error { return s.DeleteCredential(ctx(t), store.CredNode, "web2") }, true},
				{"delete none", func() error { return s.DeleteCredential(ctx(t), store.CredNode, "web2") }, false},
				{"delete node", func() error {
					must(t, s.UpsertNode(ctx(t), node("web1")))
					return s.DeleteNode(ctx(t), "web1")
				}, true},
			}
			for _, st := range steps {
				before := gen()
				if err := st.do(); err != nil {
					t.Fatalf("%s: %v", st.what, err)
				}
				if moved := gen() != before; moved != st.moved {
					t.Errorf("%s: the credentials generation moved %v, want %v", st.what, moved, st.moved)
				}
			}
		}},
		{"ListCredentials", func(t *testing.T, s store.Store) {
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredPeer, Name: "b", Hash: "hb"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredPeer, Name: "a", Hash: "ha"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web1", Hash: "hn"}))
			got, err := s.ListCredentials(ctx(t), store.CredPeer)
			must(t, err)
			if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[0].Hash != "ha" {
				t.Errorf("peer credentials = %+v, want a and b", got)
			}
			// Root's peer token of a deleted cluster goes with it.
			must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: "a", Url: "http://a"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredPeerToken, Name: "a", Hash: "pa", Secret: "tok"}))
			must(t, s.DeleteCluster(ctx(t), "a"))
			if _, err := s.GetCredential(ctx(t), store.CredPeerToken, "a"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("peer token of a deleted cluster: %v", err)
			}
		}},
	}
}
