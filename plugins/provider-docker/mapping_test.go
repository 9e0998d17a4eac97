package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

func TestHostConfig(t *testing.T) {
	pids := int64(32)
	for _, tc := range []struct {
		name string
		rc   ResourceConfig
		want container.HostConfig
	}{
		{"no limits, default policy", ResourceConfig{Image: "x"}, container.HostConfig{
			RestartPolicy: container.RestartPolicy{Name: "on-failure", MaximumRetryCount: defaultMaxRestarts}}},
		{"flavor shape", ResourceConfig{Image: "x", VCPUs: 1.5, MemoryBytes: 512 << 20, PidsLimit: 32, MaxRestarts: 7}, container.HostConfig{
			Resources:     container.Resources{NanoCPUs: 1_500_000_000, Memory: 512 << 20, MemorySwap: 512 << 20, PidsLimit: &pids},
			RestartPolicy: container.RestartPolicy{Name: "on-failure", MaximumRetryCount: 7}}},
		{"half a cpu", ResourceConfig{Image: "x", VCPUs: 0.5, Restart: "no"}, container.HostConfig{
			Resources: container.Resources{NanoCPUs: 500_000_000}, RestartPolicy: container.RestartPolicy{Name: "no"}}},
		{"always", ResourceConfig{Image: "x", Restart: "always"}, container.HostConfig{RestartPolicy: container.RestartPolicy{Name: "always"}}},
		{"unless-stopped", ResourceConfig{Image: "x", Restart: "unless-stopped"}, container.HostConfig{RestartPolicy: container.RestartPolicy{Name: "unless-stopped"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hostConfig(tc.rc, "none", true)
			init := true
			tc.want.NetworkMode, tc.want.Init = "none", &init
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("hostConfig(%+v)\n got %+v\nwant %+v", tc.rc, *got, tc.want)
			}
		})
	}
}

func TestNetworkModeNoneWhenTheAgentWiresThePort(t *testing.T) {
	if got := networkMode(ResourceConfig{Image: "x", Netns: "/run/netns/unyo-1"}, "bridge"); got != "none" {
		t.Errorf("with a port namespace: %q, want none", got)
	}
	if got := networkMode(ResourceConfig{Image: "x"}, "bridge"); got != "bridge" {
		t.Errorf("without: %q, want the plugin's bridge", got)
	}
}

func TestParseResource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    map[string]any
		field string // "" = valid
	}{
		{"minimal", map[string]any{"image": "busybox"}, ""},
		{"full", map[string]any{"image": "busybox", "image_tar": "/x.tar", "command": []any{"sleep", "1"}, "env": map[string]any{"A": "b"},
			"vcpus": 0.5, "memory_bytes": float64(64 << 20), "pids_limit": float64(16), "restart": "always", "max_restarts": float64(2), "netns": "/run/netns/x"}, ""},
		{"no image", map[string]any{"command": []any{"x"}}, "image"},
		{"negative cpus", map[string]any{"image": "x", "vcpus": -1.0}, "vcpus"},
		{"tiny memory", map[string]any{"image": "x", "memory_bytes": float64(1 << 20)}, "memory_bytes"},
		{"negative pids", map[string]any{"image": "x", "pids_limit": -1.0}, "pids_limit"},
		{"bad restart", map[string]any{"image": "x", "restart": "sometimes"}, "restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseResource(tc.in)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("parseResource: %v", err)
				}
				return
			}
			ce, ok := err.(*sdk.ConfigError)
			if !ok || len(ce.Violations) == 0 || ce.Violations[0].Field != tc.field {
				t.Fatalf("parseResource: %v, want a problem with %s", err, tc.field)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	caller := map[string]string{"unyo.dev/node": "n1", "unyo.dev/cluster": "c1", "unyo.dev/compute": "web-1", "unyo.dev/service": "web",
		labelID: "forged"}
	got, err := containerLabels("web-1", caller, map[string]any{"image": "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"unyo.dev/node": "n1", "unyo.dev/cluster": "c1", "unyo.dev/compute": "web-1", "unyo.dev/service": "web",
		labelID: "web-1", labelConfig: `{"image":"busybox"}`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("containerLabels = %v, want %v", got, want)
	}
	back := callerLabels(got)
	delete(caller, labelID)
	if !reflect.DeepEqual(back, caller) {
		t.Errorf("callerLabels = %v, want %v", back, caller)
	}
}

func TestContainerName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"web-1", "unyo-web-1"},
		{"conf-ab12-lifecycle-a", "unyo-conf-ab12-lifecycle-a"},
		{"web/1", "unyo-web_1-"},
		{"-x", "unyo-_x-"},
		{"", "unyo--"},
	} {
		got := containerName("unyo-", tc.id)
		if !strings.HasPrefix(got, tc.want) || (strings.HasSuffix(tc.want, "-") && len(got) != len(tc.want)+8) {
			t.Errorf("containerName(%q) = %q, want %q(+digest)", tc.id, got, tc.want)
		}
	}
	if containerName("u-", "a/b") == containerName("u-", "a_b") {
		t.Error("ids a/b and a_b share a container name")
	}
}

func TestStateOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      observed
		state  pluginv1.ResourceState
		reason []string
	}{
		{"running", observed{Status: "running"}, sdk.Running, nil},
		{"unhealthy", observed{Status: "running", Health: "unhealthy"}, sdk.Broken, []string{"health check"}},
		{"clean exit", observed{Status: "exited"}, sdk.Stopped, []string{"status 0"}},
		{"crash", observed{Status: "exited", ExitCode: 3, Logs: "boom"}, sdk.Broken, []string{"status 3", "last output: boom"}},
		{"crash after restarts", observed{Status: "exited", ExitCode: 3, RestartCount: 2}, sdk.Broken, []string{"status 3", "after 2 restarts"}},
		{"oom", observed{Status: "exited", ExitCode: 137, OOMKilled: true}, sdk.Broken, []string{"OOM", "137"}},
		{"restarting", observed{Status: "restarting", ExitCode: 1, RestartCount: 1}, sdk.Broken, []string{"status 1", "restarting"}},
		{"created", observed{Status: "created"}, sdk.Pending, []string{"not started"}},
		{"paused", observed{Status: "paused"}, sdk.Stopped, []string{"paused"}},
		{"dead", observed{Status: "dead"}, sdk.Broken, []string{"dead"}},
		{"removing", observed{Status: "removing"}, sdk.Deleted, nil},
		{"start error", observed{Status: "exited", ExitCode: 127, Error: "exec: nope"}, sdk.Broken, []string{"127", "exec: nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, reason := stateOf(tc.o)
			if st != tc.state {
				t.Errorf("state %v (%s), want %v", st, reason, tc.state)
			}
			for _, w := range tc.reason {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q lacks %q", reason, w)
				}
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\n\nb\nc\nd\n", 2); got != "c | d" {
		t.Errorf("lastLines = %q", got)
	}
	if got := lastLines("", 3); got != "" {
		t.Errorf("lastLines of nothing = %q", got)
	}
}

func TestStatsMetrics(t *testing.T) {
	var s container.StatsResponse
	s.CPUStats.CPUUsage.TotalUsage = 2_500_000_000
	s.MemoryStats.Usage, s.MemoryStats.Limit = 10<<20, 64<<20
	s.MemoryStats.Stats = map[string]uint64{"total_inactive_file": 2 << 20}
	s.Networks = map[string]container.NetworkStats{"eth0": {RxBytes: 100, TxBytes: 50}, "eth1": {RxBytes: 1, TxBytes: 2}}
	s.BlkioStats.IoServiceBytesRecursive = []container.BlkioStatEntry{{Op: "Read", Value: 4096}, {Op: "Write", Value: 8192}, {Op: "Total", Value: 12288}}
	s.PidsStats.Current = 3
	got := map[string]float64{}
	for _, m := range statsMetrics(s) {
		got[m.Label] = m.Value
		if m.Label == "rss" && (m.Max == nil || *m.Max != 64<<20) {
			t.Errorf("rss max = %v, want the memory limit", m.Max)
		}
	}
	want := map[string]float64{"cpu_seconds": 2.5, "rss": 8 << 20, "net_rx_bytes": 101, "net_tx_bytes": 52,
		"blkio_read_bytes": 4096, "blkio_write_bytes": 8192, "pids": 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("statsMetrics = %v, want %v", got, want)
	}
}

func TestFits(t *testing.T) {
	for _, tc := range []struct {
		rc   ResourceConfig
		want string
	}{
		{ResourceConfig{VCPUs: 2, MemoryBytes: 1 << 30}, ""},
		{ResourceConfig{}, ""},
		{ResourceConfig{VCPUs: 2.5}, "2.5 vCPUs and this node has 2"},
		{ResourceConfig{MemoryBytes: 8 << 30}, "8192 MiB of memory and this node has 4096 MiB"},
	} {
		if got := fits(tc.rc, 2, 4<<30); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("fits(%+v) = %q, want %q", tc.rc, got, tc.want)
		}
	}
}
