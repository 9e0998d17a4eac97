package web_test

import (
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// manyAlerts is the load: 10,000 open alerts over 10 clusters.
func manyAlerts(n int) []*unyov1.Alert {
	levels := []unyov1.AlertLevel{unyov1.AlertLevel_ALERT_LEVEL_WARNING, unyov1.AlertLevel_ALERT_LEVEL_CRITICAL, unyov1.AlertLevel_ALERT_LEVEL_FATAL}
	t0 := time.Now().Add(-48 * time.Hour)
	out := make([]*unyov1.Alert, n)
	for i := range n {
		out[i] = alert(fmt.Sprintf("cluster-%d", i%10), fmt.Sprintf("%08d", i), levels[i%7%3], t0.Add(time.Duration(i)*time.Second),
			fmt.Sprintf("node-%04d", i/10), fmt.Sprintf("check-%d", i%25))
	}
	return out
}

// BenchmarkAlertsPage10k renders the alerts page, API call included, with
// 10,000 open alerts over 10 clusters (the issue asks under 300 ms). It
// reports the server's time per page (arrival to the last byte handed to
// the socket) beside the round trip; the client only counts the bytes.
func BenchmarkAlertsPage10k(b *testing.B) {
	f := fixture(b)
	f.alerts = manyAlerts(10000)
	e := newEnv(b, f)
	br := e.browser()
	br.login(adminTok)
	req, err := http.NewRequest("GET", e.srv.URL+"/alerts", nil)
	if err != nil {
		b.Fatal(err)
	}
	for k, v := range br.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	var size int64
	e.served.Store(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		size, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || size < 1e6 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, size)
		}
	}
	b.ReportMetric(float64(e.served.Load())/1e6/float64(b.N), "server-ms/page")
	// The process's CPU per page (server, in-process API and the fake
	// store, and the client counting bytes): on a loaded machine the wall
	// time is mostly waiting for a core.
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/page")
	b.ReportMetric(float64(size)/1e6, "MB/page")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
