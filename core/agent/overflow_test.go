package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
)

// fakeCluster stores the results reported to it, or refuses them while down.
type fakeCluster struct {
	unyov1connect.UnimplementedAgentServiceHandler
	mu     sync.Mutex
	down   bool
	stored []*unyov1.Event
}

func (f *fakeCluster) ReportResults(_ context.Context, req *connect.Request[unyov1.ReportResultsRequest]) (*connect.Response[unyov1.ReportResultsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}
	f.stored = append(f.stored, req.Msg.GetResults()...)
	return connect.NewResponse(&unyov1.ReportResultsResponse{}), nil
}

func (f *fakeCluster) setDown(v bool) { f.mu.Lock(); f.down = v; f.mu.Unlock() }

func (f *fakeCluster) outputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.stored {
		out = append(out, e.GetOutput())
	}
	return out
}

// disk makes the results spool fail like a full disk while full is set.
type disk struct {
	mu   sync.Mutex
	full bool
}

func (d *disk) set(full bool) { d.mu.Lock(); d.full = full; d.mu.Unlock() }

func (d *disk) wrap(append func(...[]byte) error) func(...[]byte) error {
	return func(recs ...[]byte) error {
		d.mu.Lock()
		full := d.full
		d.mu.Unlock()
		if full {
			return fmt.Errorf("append to spool: write /spool/x.seg: %w", syscall.ENOSPC)
		}
		return append(recs...)
	}
}

func newTestAgent(t *testing.T, bufferRecords int) (*Agent, *fakeCluster, *disk) {
	t.Helper()
	fake := &fakeCluster{}
	mux := http.NewServeMux()
	mux.Handle(unyov1connect.NewAgentServiceHandler(fake))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a, err := New(Options{NodeName: "n1", ClusterURL: srv.URL, DataDir: t.TempDir(), BufferRecords: bufferRecords,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.closeSpools)
	d := &disk{}
	a.appendResults = d.wrap(a.appendResults)
	return a, fake, d
}

func (a *Agent) result(i int) {
	e := a.newEvent(checks.Definition{Name: "counter"})
	e.StartedAt = timestamppb.Now()
	e.Status = unyov1.CheckStatus_CHECK_STATUS_OK
	e.Output = fmt.Sprintf("run %d", i)
	a.spoolResult(e)
}

// spooled drains the results spool and returns the outputs in order.
func spooled(t *testing.T, a *Agent) []string {
	t.Helper()
	var out []string
	for {
		b, err := a.spool.Peek(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if b.Len() == 0 {
			return out
		}
		for _, r := range b.Records {
			var e unyov1.Event
			if err := proto.Unmarshal(r, &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e.GetOutput())
		}
		if err := a.spool.Ack(b); err != nil {
			t.Fatal(err)
		}
	}
}

func runs(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("run %d", i))
	}
	return out
}

// TestSpoolWriteFailureKeepsResultsInMemory: while the spool cannot be
// written, results wait in memory, in order, behind which later results
// queue; when the disk comes back all of them are spooled, none lost.
func TestSpoolWriteFailureKeepsResultsInMemory(t *testing.T) {
	a, fake, d := newTestAgent(t, 100)
	fake.setDown(true)
	a.result(0)
	d.set(true)
	for i := 1; i < 30; i++ {
		a.result(i)
	}
	if st := a.overflow.stats(); st.Records != 29 || st.DroppedRecords != 0 || !strings.Contains(st.SpoolError, "no space left") {
		t.Fatalf("buffer: %+v", st)
	}
	// Still failing: nothing moves, nothing is lost.
	if progress, left := a.flushOverflow(context.Background()); progress || left != 29 {
		t.Fatalf("flush with the disk full: progress %v, %d left", progress, left)
	}
	d.set(false)
	a.result(30) // queues behind the buffered ones
	if progress, left := a.flushOverflow(context.Background()); !progress || left != 0 {
		t.Fatalf("flush after the disk came back: progress %v, %d left", progress, left)
	}
	if got := spooled(t, a); !slices.Equal(got, runs(0, 31)) {
		t.Fatalf("spooled %v", got)
	}
	if st := a.overflow.stats(); st.Records != 0 || st.SpoolError != "" {
		t.Fatalf("buffer after the flush: %+v", st)
	}
}

// TestSpoolWriteFailureForwardsFromMemory: with the disk full for good but
// the cluster up, results kept in memory go straight to the cluster.
func TestSpoolWriteFailureForwardsFromMemory(t *testing.T) {
	a, fake, d := newTestAgent(t, 100)
	a.setRegistered(true)
	d.set(true)
	for i := range 12 {
		a.result(i)
	}
	for range 10 {
		if _, left := a.flushOverflow(context.Background()); left == 0 {
			break
		}
	}
	if got := fake.outputs(); !slices.Equal(got, runs(0, 12)) {
		t.Fatalf("the cluster got %v", got)
	}
	if st := a.overflow.stats(); st.Records != 0 || a.status.Sent != 12 {
		t.Fatalf("buffer %+v, sent %d", st, a.status.Sent)
	}
}

// TestBufferFullDropsAreCountedAndRaised: when the buffer is full too, the
// oldest results are dropped, counted in /status, and an agent-spool
// CRITICAL result says how many and why once it can be delivered.
func TestBufferFullDropsAreCountedAndRaised(t *testing.T) {
	a, fake, d := newTestAgent(t, 5)
	fake.setDown(true)
	d.set(true)
	for i := range 8 {
		a.result(i)
	}
	st := a.overflow.stats()
	if st.Records != 5 || st.DroppedRecords != 3 || st.DroppedBytes == 0 {
		t.Fatalf("buffer: %+v", st)
	}
	rec := httptest.NewRecorder()
	a.statusHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	if body := rec.Body.String(); !strings.Contains(body, `"dropped_records":3`) {
		t.Fatalf("/status does not count the drops: %s", body)
	}
	// Nothing can be reported while the buffer is full.
	a.reportDrops()
	if a.overflow.stats().Records != 5 {
		t.Fatal("reported drops into a full buffer")
	}
	d.set(false)
	a.flushOverflow(context.Background())
	a.reportDrops()
	a.flushOverflow(context.Background())
	got := spooled(t, a)
	if len(got) != 6 || !slices.Equal(got[:5], runs(3, 8)) {
		t.Fatalf("spooled %q", got)
	}
	for _, want := range []string{"CRITICAL - dropped 3 check results", "no space left on device", "buffer (5 results"} {
		if !strings.Contains(got[5], want) {
			t.Errorf("drop event %q does not say %q", got[5], want)
		}
	}
	// Reported once.
	a.reportDrops()
	if st := a.overflow.stats(); st.Records != 0 || len(spooled(t, a)) != 0 {
		t.Fatalf("drops reported twice: %+v", st)
	}
}

// TestBufferIsSpooledAtExit: results still in memory when the agent stops
// are spooled if the disk is back, so the next run sends them.
func TestBufferIsSpooledAtExit(t *testing.T) {
	a, _, d := newTestAgent(t, 100)
	d.set(true)
	for i := range 3 {
		a.result(i)
	}
	d.set(false)
	a.flushOverflowAtExit()
	if got := spooled(t, a); !slices.Equal(got, runs(0, 3)) {
		t.Fatalf("spooled %v", got)
	}
}
