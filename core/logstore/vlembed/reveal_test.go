package vlembed_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/testutil"
)

// writerEnv makes the test binary a process that writes lines to the store
// in the directory it names until it is killed (TestRevealWriter).
const writerEnv = "UNYO_VLEMBED_WRITER"

// TestRevealWriter is the killed writer of TestRevealStreamsAfterKill.
func TestRevealWriter(t *testing.T) {
	dir := os.Getenv(writerEnv)
	if dir == "" {
		t.Skip("runs only as TestRevealStreamsAfterKill's writer")
	}
	s, err := vlembed.Open(vlembed.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if err := s.Write(t.Context(), []logstore.Entry{{Host: "h", App: "a", Message: "line"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRevealStreamsAfterKill: a writer is SIGKILLed once its lines are on
// disk but the stream's registration is not (VictoriaLogs flushes the two
// apart), which hides the lines after a restart until the stream is written
// to again. RevealStreams must show every one of them, and its marker line
// must not be an answer to any query.
func TestRevealStreamsAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills writer processes until one dies between two flushes")
	}
	var dir string
	testutil.Eventually(t, 90*time.Second, "a writer killed with its lines on disk and its stream not", func() error {
		dir = filepath.Join(t.TempDir(), "logs")
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRevealWriter$")
		cmd.Env = append(os.Environ(), writerEnv+"="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			data, index := flushedParts(dir, "datadb"), flushedParts(dir, "indexdb")
			switch {
			case index > 0:
				return errPhase("the stream's registration reached the disk first")
			case data > 0:
				cmd.Process.Kill()
				return nil
			}
			time.Sleep(2 * time.Millisecond)
		}
		return errPhase("nothing flushed within 10s")
	})

	s, err := vlembed.Open(vlembed.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := logstore.Query{Host: "h", App: "a", Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour), Limit: logstore.MaxLimit}
	count := func() int {
		t.Helper()
		got, err := s.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			if e.Message != "line" {
				t.Fatalf("a query returned %q, which is not a line the writer wrote", e.Message)
			}
		}
		return len(got)
	}
	before := count()
	if err := s.RevealStreams(t.Context(), []logstore.Stream{{Host: "h", App: "a", Time: time.Now().Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	revealed := count()
	// The marker is the newest line of the stream: a limit of one must
	// still answer with a line the writer wrote.
	newest := q
	newest.Limit = 1
	if got, err := s.Query(t.Context(), newest); err != nil || len(got) != 1 || got[0].Message != "line" {
		t.Errorf("the newest line: got %+v, %v; want one line the writer wrote", got, err)
	}
	// A line of the stream re-registers it too: what it shows is everything.
	if err := s.Write(t.Context(), []logstore.Entry{{Host: "h", App: "a", Message: "line"}}); err != nil {
		t.Fatal(err)
	}
	all := count() - 1
	t.Logf("lines visible at open: %d; after RevealStreams: %d; on disk: %d", before, revealed, all)
	if all == 0 {
		t.Fatal("the writer's flushed lines are not on disk at all")
	}
	if revealed != all {
		t.Errorf("RevealStreams showed %d lines, %d are stored", revealed, all)
	}
	buckets, err := s.Stats(t.Context(), q, logstore.ByApp, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	for _, b := range buckets {
		hits += int(b.Count)
	}
	if hits != all+1 {
		t.Errorf("stats count %d lines, %d were written: the marker line must not count", hits, all+1)
	}
}

type errPhase string

func (e errPhase) Error() string { return string(e) }

// flushedParts counts the parts a store's partitions list for kind
// (datadb or indexdb) in their parts.json.
func flushedParts(dir, kind string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "partitions", "*", kind, "parts.json"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += strings.Count(string(b), `"`) / 2
	}
	return n
}
