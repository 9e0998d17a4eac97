package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// benchContainers and benchParallel: 50 containers, created and started
// 8 at a time, the same way on both sides.
const (
	benchContainers = 50
	benchParallel   = 8
)

// BenchmarkCreateStart50 creates and starts 50 containers through the
// plugin (gRPC, the SDK's idempotent Create, image check, create, start,
// inspect) and 50 with direct Engine API create+start calls of the same
// config on the same dockerd, side by side in each iteration, and reports
// both times and their ratio.
//
//	go test -run '^$' -bench CreateStart50 -benchtime 3x ./plugins/provider-docker/
func BenchmarkCreateStart50(b *testing.B) {
	d := startDocker(b)
	c := testbin.Serve(b, &dockerProvider{}, map[string]any{"host": d.Host})
	cli := d.Client()
	defer cli.Close()
	cfg := map[string]any{"image": testImage, "command": []any{"sleep", "3600"}, "vcpus": 0.1, "memory_bytes": float64(16 << 20)}
	rc, err := parseResource(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var viaPlugin, direct time.Duration
	b.ResetTimer()
	for i := range b.N {
		viaPlugin += timed(b, func(j int) error {
			_, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: fmt.Sprintf("bench-%d-%d", i, j),
				Config: testbin.Struct(b, cfg), Labels: map[string]string{"unyo.dev/node": "bench"}})
			return err
		})
		b.StopTimer()
		removeAll(b, cli)
		b.StartTimer()
		direct += timed(b, func(j int) error {
			labels, _ := containerLabels(fmt.Sprintf("direct-%d-%d", i, j), nil, cfg)
			cr, err := cli.ContainerCreate(context.Background(), &container.Config{Image: testImage, Cmd: rc.Command, Labels: labels},
				hostConfig(rc, "none", true), nil, nil, fmt.Sprintf("direct-%d-%d", i, j))
			if err != nil {
				return err
			}
			return cli.ContainerStart(context.Background(), cr.ID, container.StartOptions{})
		})
		b.StopTimer()
		removeAll(b, cli)
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(viaPlugin.Seconds()/n, "plugin-s/50")
	b.ReportMetric(direct.Seconds()/n, "direct-s/50")
	b.ReportMetric(viaPlugin.Seconds()/direct.Seconds(), "plugin/direct")
}

// timed runs fn for 0..49, benchParallel at a time, and returns the wall
// time.
func timed(b *testing.B, fn func(j int) error) time.Duration {
	began := time.Now()
	sem := make(chan struct{}, benchParallel)
	var wg sync.WaitGroup
	for j := range benchContainers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(j); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	return time.Since(began)
}

func removeAll(b *testing.B, cli *client.Client) {
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, benchParallel)
	for _, c := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}
