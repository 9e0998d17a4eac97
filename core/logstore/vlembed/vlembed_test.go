package vlembed_test

import (
	"path/filepath"
	"testing"

	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/logstoretest"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
)

func open(t testing.TB) logstore.Store {
	s, err := vlembed.Open(vlembed.Options{Path: filepath.Join(t.TempDir(), "logs")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) { logstoretest.Run(t, open) }

func TestReopenKeepsData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	s, err := vlembed.Open(vlembed.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), []logstore.Entry{{Host: "h", App: "a", Message: "persisted"}}); err != nil {
		t.Fatal(err)
	}
	// A second Open of a directory in use must fail with an error, not crash.
	if s2, err := vlembed.Open(vlembed.Options{Path: dir}); err == nil {
		s2.Close()
		t.Errorf("second Open of a locked directory succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Query(t.Context(), logstore.Query{}); err == nil {
		t.Errorf("Query after Close: want an error")
	}
	s, err = vlembed.Open(vlembed.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Query(t.Context(), logstore.Query{})
	if err != nil || len(got) != 1 || got[0].Message != "persisted" {
		t.Fatalf("after reopen: got %+v, %v", got, err)
	}
}

func BenchmarkWrite(b *testing.B) {
	s := open(b)
	defer s.Close()
	logstoretest.BenchmarkWrite(b, s, 1000)
}
