package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// startCluster serves a cluster on st at a loopback port and returns a
// client. opts may give the cluster's metrics and log stores.
func startCluster(tb testing.TB, st store.Store, opts ...cluster.Options) *client.Clients {
	tb.Helper()
	var o cluster.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, err := client.New(client.Options{URL: startClusterWith(tb, st, o, server.Options{})})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// startClusterWith serves a cluster with the given server options (auth,
// TLS, a logger for server and cluster: quiet if nil; Listen is filled in)
// and returns its URL.
func startClusterWith(tb testing.TB, st store.Store, o cluster.Options, so server.Options) string {
	tb.Helper()
	_, url := serveCluster(tb, st, o, so)
	return url
}

// serveCluster is startClusterWith returning the cluster too; the replica
// is o.Replica (default r1).
func serveCluster(tb testing.TB, st store.Store, o cluster.Options, so server.Options) (*cluster.Cluster, string) {
	tb.Helper()
	if so.Logger == nil {
		so.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	so.Listen = "127.0.0.1:0"
	srv := server.New(so)
	o.Name, o.Logger = "c1", so.Logger
	if o.Replica == "" {
		o.Replica = "r1"
	}
	cl := cluster.New(st, o)
	// As `unyo server` does before serving.
	if err := cl.ReplayTelemetry(context.Background()); err != nil {
		tb.Fatal(err)
	}
	cl.Register(srv)
	ln, err := srv.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); cl.Run(ctx) }()
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	tb.Cleanup(func() { cancel(); wg.Wait() })
	if so.CertFile != "" {
		return cl, "https://" + ln.Addr().String()
	}
	return cl, "http://" + ln.Addr().String()
}

// ingestAuth is how the benchmark's agents reach the cluster.
type ingestAuth int

const (
	open        ingestAuth = iota // no authentication
	nodeTokens                    // enrolled with a join token, then each node's own credential
	tlsAndNodes                   // the same over TLS
	tlsAndCerts                   // over TLS, each node's certificate from the node CA (mTLS)
)

// benchIngest measures check results accepted and stored per second
// through the agent API: 8 agents sending batches of 500 concurrently.
func benchIngest(b *testing.B, st store.Store) { benchIngestAuth(b, st, open) }

// benchIngestAuth is benchIngest with the agents authenticated as mode
// says, as real agents are.
func benchIngestAuth(b *testing.B, st store.Store, mode ingestAuth) {
	var so server.Options
	var co cluster.Options
	var ca string
	if mode != open {
		so.Auth = server.Auth{AdminTokens: []string{"bench-admin"}, JoinTokens: []string{"bench-join"}}
	}
	if mode == tlsAndNodes || mode == tlsAndCerts {
		authority := testutil.NewCA(b, "bench")
		so.CertFile, so.KeyFile = authority.Issue(b, "cluster", "127.0.0.1")
		ca = authority.CertFile
	}
	if mode == tlsAndCerts {
		caCert, caKey, err := identity.CreateCA(b.TempDir(), "")
		if err != nil {
			b.Fatal(err)
		}
		if co.NodeCA, err = identity.LoadCA(caCert, caKey); err != nil {
			b.Fatal(err)
		}
		so.ClientCAFile = caCert
	}
	url := startClusterWith(b, st, co, so)
	ctx := context.Background()
	const agents, batch = 8, 500
	clients := make([]*client.Clients, agents)
	for i := range agents {
		join, err := client.New(client.Options{URL: url, Token: "bench-join", TLS: client.TLSOptions{CAFile: ca}})
		if err != nil {
			b.Fatal(err)
		}
		node := &unyov1.Node{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"bench": "yes"}}
		req := &unyov1.RegisterRequest{Node: node}
		var key *ecdsa.PrivateKey
		if mode == tlsAndCerts {
			if key, req.Csr, err = identity.NewNodeKey(node.GetName()); err != nil {
				b.Fatal(err)
			}
		}
		resp, err := join.Agent.Register(ctx, connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		opts := client.Options{URL: url, Token: resp.Msg.GetNodeToken(), TLS: client.TLSOptions{CAFile: ca}}
		switch {
		case mode == tlsAndCerts:
			cert, err := nodeKeyPair(resp.Msg.GetNodeCertificate(), key)
			if err != nil {
				b.Fatal(err)
			}
			opts.ClientCertificate = func() (*tls.Certificate, error) { return cert, nil }
		case mode != open && resp.Msg.GetNodeToken() == "":
			b.Fatal("enrolment returned no node credential")
		}
		if clients[i], err = client.New(opts); err != nil {
			b.Fatal(err)
		}
	}
	var sent atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := b.N/agents + 1
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[i]
			node := fmt.Sprintf("node-%d", i)
			for done := 0; done < per; done += batch {
				req := &unyov1.ReportResultsRequest{Node: node}
				for j := 0; j < batch; j++ {
					req.Results = append(req.Results, &unyov1.Event{
						Id: uuid.NewString(), Node: node, Check: fmt.Sprintf("check-%d", j%20),
						Level: unyov1.Level_LEVEL_SUCCESS, Output: "OK - load average: 0.12, 0.08, 0.05",
						Perfdata:  []*unyov1.PerfData{{Label: "load1", Value: 0.12, Warn: "5", Crit: "10"}},
						StartedAt: timestamppb.Now(), Duration: durationpb.New(3 * time.Millisecond),
					})
				}
				resp, err := c.Agent.ReportResults(ctx, connect.NewRequest(req))
				if err != nil {
					b.Error(err)
					return
				}
				sent.Add(int64(resp.Msg.GetAccepted()))
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(sent.Load())/time.Since(start).Seconds(), "results/s")
}

// nodeKeyPair joins the certificate the cluster signed with the node's key.
func nodeKeyPair(certPEM []byte, key *ecdsa.PrivateKey) (*tls.Certificate, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return &c, err
}

// BenchmarkIngestSQLite runs the same ingest without authentication, with
// node credentials, with node credentials over TLS and with node
// certificates (mTLS), side by side in one run: what identity and TLS cost. Request limits apply to all three.
func BenchmarkIngestSQLite(b *testing.B) {
	for _, mode := range []struct {
		name string
		auth ingestAuth
	}{{"open", open}, {"node-tokens", nodeTokens}, {"tls+node-tokens", tlsAndNodes}, {"tls+node-certs", tlsAndCerts}} {
		b.Run(mode.name, func(b *testing.B) {
			st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			benchIngestAuth(b, st, mode.auth)
		})
	}
}

// The PostgreSQL server keeps fsync on: commits are durable.
func BenchmarkIngestPostgresDurable(b *testing.B) {
	srv := testpg.New(b, testpg.WithDurable())
	st, err := sqlstore.OpenPostgres(context.Background(), srv.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchIngest(b, st)
}
