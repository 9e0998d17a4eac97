package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-libvirt/virttest"
)

// BenchmarkVMReady measures a VM from Create (through the plugin's gRPC
// API: define, start) to the ready line on its console, under
// qemu:///embed with software emulation, 1 vCPU and 256 MiB; Delete is
// outside the timing. The first VM of a fresh embed root also pays
// libvirt's QEMU capability probe, so one VM boots before the timer.
//
//	go test -run '^$' -bench VMReady -benchtime 3x ./plugins/provider-libvirt/
func BenchmarkVMReady(b *testing.B) {
	env := startVMs(b)
	ctx := context.Background()
	boot := func(id string) (created, ready time.Duration) {
		began := time.Now()
		r, err := create(b, env.c, id, map[string]any{"image": "guest", "address": "169.254.33.2", "vcpus": 1.0, "memory_bytes": float64(256 << 20)})
		if err != nil {
			b.Fatal(err)
		}
		created = time.Since(began)
		waitConsole(b, r.GetAttributes()["console_log"], virttest.ReadyLine, readyDeadline)
		return created, time.Since(began)
	}
	remove := func(id string) {
		if _, err := env.c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: id}); err != nil {
			b.Fatal(err)
		}
	}
	boot("bench-warm")
	remove("bench-warm")
	var created, ready time.Duration
	n := 0
	// b.Loop runs this function once: libvirt opens one embed root per
	// process, so the environment cannot be made again for each b.N.
	for b.Loop() {
		c, r := boot(fmt.Sprintf("bench-%d", n))
		created += c
		ready += r
		b.StopTimer()
		remove(fmt.Sprintf("bench-%d", n))
		b.StartTimer()
		n++
	}
	b.StopTimer()
	b.ReportMetric(created.Seconds()/float64(n), "create-s")
	b.ReportMetric(ready.Seconds()/float64(n), "ready-s")
}
