package cluster_test

import (
	"context"
	"flag"
	"log/slog"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/apifuzz"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// FuzzClusterAPI sends random and mutated requests to every RPC method of a
// cluster on SQLite: each must succeed or be refused with a specific code,
// and nothing may panic (in the handlers or in the loops that process what
// they stored).
func FuzzClusterAPI(f *testing.F) {
	watch := &apifuzz.PanicWatch{}
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(f.TempDir(), "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	// The embedded stores, so that the metrics and logs services are
	// reached too (only one embedded VictoriaMetrics fits a process; the
	// tests using one run one after the other).
	db, err := vmembed.Open(vmembed.Options{DataDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	logs, err := vlembed.Open(vlembed.Options{Path: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { logs.Close() })
	c := serveWatched(f, st, cluster.Options{Metrics: db, Logs: logs}, slog.New(watch))
	methods := apifuzz.Methods(c)
	if *writeSeeds {
		if err := apifuzz.WriteSeeds(filepath.Join("testdata", "fuzz", "FuzzClusterAPI"), methods); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := c.Agent.Register(context.Background(), connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: apifuzz.Node}})); err != nil {
		f.Fatal(err)
	}
	for _, m := range methods {
		f.Add(m.Procedure, m.SeedBytes())
	}
	f.Fuzz(func(t *testing.T, procedure string, payload []byte) {
		if err := apifuzz.Call(apifuzz.Pick(methods, procedure), payload); err != nil {
			t.Fatal(err)
		}
		if p := watch.Take(); len(p) > 0 {
			t.Fatalf("the cluster logged a panic: %v", p)
		}
	})
}

// serveWatched is startCluster with log, the fuzz target's panic watch, as
// the cluster's and its server's logger: a panic the server recovers from
// is logged there, not returned.
func serveWatched(tb testing.TB, st store.Store, o cluster.Options, log *slog.Logger) *client.Clients {
	tb.Helper()
	c, err := client.New(client.Options{URL: startClusterWith(tb, st, o, server.Options{Logger: log})})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
