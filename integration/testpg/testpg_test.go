package testpg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/testpg"
)

func query(t *testing.T, dsn, sql string, args ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestStart(t *testing.T) {
	dsn := testpg.Start(t)
	if got := query(t, dsn, "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want off by default", got)
	}
	if got := query(t, dsn, "SHOW server_version_num"); got < "150000" {
		t.Errorf("server_version_num = %s, want PostgreSQL 15 or newer", got)
	}
}

func TestDurable(t *testing.T) {
	srv := testpg.New(t, testpg.WithDurable(), testpg.WithSetting("work_mem", "8MB"))
	if got := query(t, srv.DSN(), "SHOW fsync"); got != "on" {
		t.Errorf("fsync = %q, want on with WithDurable", got)
	}
	if got := query(t, srv.DSN(), "SHOW synchronous_commit"); got != "on" {
		t.Errorf("synchronous_commit = %q, want on with WithDurable", got)
	}
	if got := query(t, srv.DSN(), "SHOW work_mem"); got != "8MB" {
		t.Errorf("work_mem = %q, want 8MB from WithSetting", got)
	}
}

func TestCreateDatabaseIsolates(t *testing.T) {
	srv := testpg.New(t)
	a, b := srv.CreateDatabase(t), srv.CreateDatabase(t)
	if a == b {
		t.Fatalf("two databases share DSN %s", a)
	}
	query(t, a, "SELECT current_database()")
	if query(t, a, "SELECT current_database()") == query(t, b, "SELECT current_database()") {
		t.Fatal("two DSNs reach the same database")
	}
}

func TestRestartKeepsDataAndPort(t *testing.T) {
	srv := testpg.New(t)
	dsn := srv.CreateDatabase(t)
	port := srv.Port()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')"); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, dsn); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("old connection still works after stop")
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if srv.Port() != port {
		t.Fatalf("port changed from %d to %d", port, srv.Port())
	}
	if got := query(t, dsn, "SELECT v FROM kept"); got != "before restart" {
		t.Fatalf("after restart kept = %q", got)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if got := query(t, dsn, "SELECT v FROM kept"); got != "before restart" {
		t.Fatalf("after second restart kept = %q", got)
	}
}

// TestMissingPostgres runs TestStart in a child process that cannot find
// PostgreSQL: it must skip, except under CI, where it must fail.
func TestMissingPostgres(t *testing.T) {
	testutil.SkipsOrFailsWithoutTool(t, "TestStart", "PostgreSQL is not installed", testpg.BinEnv+"="+t.TempDir())
}

// CPUTime counts the backends' work: a query that burns CPU in a session
// that then ends (its time moves to the postmaster's cutime) shows up.
func TestCPUTime(t *testing.T) {
	srv := testpg.New(t)
	before, err := srv.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	query(t, srv.DSN(), "SELECT count(*)::text FROM generate_series(1, 3000000)")
	testutil.Eventually(t, 10*time.Second, "the query's CPU counted", func() error {
		after, err := srv.CPUTime()
		if err != nil {
			return err
		}
		if after-before < 100*time.Millisecond {
			return fmt.Errorf("CPU time grew by %v, want at least 100ms", after-before)
		}
		return nil
	})
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.CPUTime(); err == nil {
		t.Error("CPUTime of a stopped server: no error")
	}
}
