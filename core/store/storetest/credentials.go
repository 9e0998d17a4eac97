package storetest

import (
	"errors"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

func credentialTests() []contractTest {
	return []contractTest{
		{"PutReplacesAndLookupFinds", func(t *testing.T, s store.Store) {
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web1", Hash: "h1"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web1", Hash: "h2"}))
			if got, err := s.LookupCredential(ctx(t), "h1"); err != nil || len(got) != 0 {
				t.Errorf("the replaced hash still finds %v (err %v)", got, err)
			}
			got, err := s.LookupCredential(ctx(t), "h2")
			must(t, err)
			if len(got) != 1 || got[0].Kind != store.CredNode || got[0].Name != "web1" || got[0].CreatedAt.IsZero() {
				t.Errorf("lookup h2 = %+v", got)
			}
		}},
		{"AddRefusesExisting", func(t *testing.T, s store.Store) {
			c := store.Credential{Kind: store.CredRootToCluster, Name: "eu", Hash: "h", Secret: "tok"}
			must(t, s.AddCredential(ctx(t), c))
			if err := s.AddCredential(ctx(t), store.Credential{Kind: store.CredRootToCluster, Name: "eu", Hash: "other"}); !errors.Is(err, store.ErrExists) {
				t.Errorf("second add: %v, want ErrExists", err)
			}
			got, err := s.GetCredential(ctx(t), store.CredRootToCluster, "eu")
			must(t, err)
			if got.Secret != "tok" || got.Hash != "h" {
				t.Errorf("get = %+v", got)
			}
			if _, err := s.GetCredential(ctx(t), store.CredRootToCluster, "us"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("get of a missing credential: %v", err)
			}
		}},
		{"SameHashOfTwoKinds", func(t *testing.T, s store.Store) {
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredRoot, Name: "root", Hash: "h"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredRootToCluster, Name: "c1", Hash: "h", Secret: "t"}))
			got, err := s.LookupCredential(ctx(t), "h")
			must(t, err)
			if len(got) != 2 {
				t.Errorf("lookup = %+v, want both", got)
			}
		}},
		{"DeleteNodeRevokes", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), &unyov1.Node{Name: "web1"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "web1", Hash: "h"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredNodeCert, Name: "web1", Hash: "serial1"}))
			must(t, s.DeleteNode(ctx(t), "web1"))
			if _, err := s.GetNode(ctx(t), "web1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleted node: %v", err)
			}
			if got, _ := s.LookupCredential(ctx(t), "h"); len(got) != 0 {
				t.Errorf("the deleted node's credential still finds %v", got)
			}
			if _, err := s.GetCredential(ctx(t), store.CredNodeCert, "web1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the deleted node's certificate serial: %v, want ErrNotFound", err)
			}
			if err := s.DeleteNode(ctx(t), "web1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("second delete: %v, want ErrNotFound", err)
			}
			// A credential whose node was never stored is revoked too.
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredNode, Name: "half", Hash: "h4"}))
			must(t, s.DeleteNode(ctx(t), "half"))
			if got, _ := s.LookupCredential(ctx(t), "h4"); len(got) != 0 {
				t.Errorf("the half-enrolled node's credential still finds %v", got)
			}
		}},
		{"DeleteClusterRevokes", func(t *testing.T, s store.Store) {
			must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: "eu", Url: "http://eu"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredCluster, Name: "eu", Hash: "h"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredRootToCluster, Name: "eu", Hash: "h2", Secret: "t"}))
			must(t, s.PutCredential(ctx(t), store.Credential{Kind: store.CredCluster, Name: "us", Hash: "h3"}))
			must(t, s.DeleteCluster(ctx(t), "eu"))
			if _, err := s.GetCluster(ctx(t), "eu"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleted cluster: %v", err)
			}
			for _, h := range []string{"h", "h2"} {
				if got, _ := s.LookupCredential(ctx(t), h); len(got) != 0 {
					t.Errorf("the deleted cluster's credential %s still finds %v", h, got)
				}
			}
			// A cluster added but never registered has only credentials.
			must(t, s.DeleteCluster(ctx(t), "us"))
			if err := s.DeleteCluster(ctx(t), "us"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("second delete: %v, want ErrNotFound", err)
			}
		}},
	}
}
