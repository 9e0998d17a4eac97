package clickhouse_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/chtest"
	"github.com/unyo-ops/unyo/core/logstore/clickhouse"
	"github.com/unyo-ops/unyo/core/logstore/logstoretest"
)

// opener returns stores on one server, each with its own table, so subtests
// are isolated without paying for a server start each.
func opener(srv *chtest.Server) logstoretest.Opener {
	var n atomic.Int64
	return func(t testing.TB) logstore.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := clickhouse.Open(ctx, clickhouse.Options{Addr: srv.Addr, Table: fmt.Sprintf("logs_%d", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestContract(t *testing.T) {
	logstoretest.Run(t, opener(chtest.Start(t)))
}

func TestServerGoesAway(t *testing.T) {
	srv := chtest.Start(t)
	s := opener(srv)(t)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Write(ctx, []logstore.Entry{{Host: "h", Message: "before"}}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := s.Write(ctx, []logstore.Entry{{Host: "h", Message: "after"}}); err == nil {
		t.Errorf("Write to a stopped server: want an error")
	} else {
		t.Logf("Write error (for operators): %v", err)
	}
	if _, err := s.Query(ctx, logstore.Query{}); err == nil {
		t.Errorf("Query on a stopped server: want an error")
	}

	// The server comes back: the same Store reconnects, and what was written
	// before the outage is still there.
	srv.Restart(t)
	if err := s.Write(ctx, []logstore.Entry{{Host: "h", Message: "after"}}); err != nil {
		t.Fatalf("Write after the server returned: %v", err)
	}
	got, err := s.Query(ctx, logstore.Query{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Message != "after" || got[1].Message != "before" {
		t.Errorf("after the restart: %+v, want the entries after and before", got)
	}
}

// TestOpenCreatesDatabase: a new installation needs no manual DDL.
func TestOpenCreatesDatabase(t *testing.T) {
	srv := chtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ { // the second Open finds the database
		s, err := clickhouse.Open(ctx, clickhouse.Options{Addr: srv.Addr, Database: "unyo_new"})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := s.Write(ctx, []logstore.Entry{{Host: "h", Message: "m"}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Query(ctx, logstore.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != i+1 {
			t.Errorf("open %d: %d entries, want %d", i, len(got), i+1)
		}
		s.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := clickhouse.Open(ctx, clickhouse.Options{Addr: "127.0.0.1:1", DialTimeout: time.Second}); err == nil {
		t.Errorf("Open of a closed port: want an error")
	}
	if _, err := clickhouse.Open(ctx, clickhouse.Options{Addr: "127.0.0.1:1", Table: "logs; DROP TABLE x"}); err == nil {
		t.Errorf("Open with a table name that is not an identifier: want an error")
	}
}

func BenchmarkWrite(b *testing.B) {
	s := opener(chtest.Start(b))(b)
	defer s.Close()
	logstoretest.BenchmarkWrite(b, s, 10000)
}
