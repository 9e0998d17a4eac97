package agent

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestFactsFollowTheSchema: an assignment's address, image, shape and
// cpu_policy reach a provider only under the keys its resource schema
// names, so a schema that refuses unknown keys (additionalProperties false)
// is never sent one.
func TestFactsFollowTheSchema(t *testing.T) {
	as := &unyov1.Assignment{
		Address: "10.0.0.5", ImageSource: "busybox:unyo",
		Resources: &unyov1.ComputeResources{Vcpus: 2, MemoryBytes: 256 << 20, CpuPolicy: "pinned"},
	}
	for _, tc := range []struct {
		name, schema string
		want         []string
	}{
		{"exec", `{"properties":{"command":{},"env":{},"dir":{},"address":{}}}`, []string{"address"}},
		{"docker", `{"properties":{"image":{},"command":{},"env":{},"vcpus":{},"memory_bytes":{},"pids_limit":{}}}`, []string{"image", "memory_bytes", "vcpus"}},
		// provider-libvirt's schema names cpu_policy: a pinned flavor's
		// vCPUs are pinned.
		{"libvirt", `{"properties":{"image":{},"address":{},"gateway":{},"vcpus":{},"memory_bytes":{},"disk_bytes":{},"cpu_policy":{},"tap":{}}}`,
			[]string{"address", "cpu_policy", "image", "memory_bytes", "vcpus"}},
		{"none", `{"type":"object"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := schemaKeys(tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := range facts(as) {
				if keys[k] {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("facts sent = %v, want %v", got, tc.want)
			}
		})
	}
	if f := facts(&unyov1.Assignment{}); len(f) != 0 {
		t.Errorf("facts of an empty assignment = %v, want none", slices.Sorted(maps.Keys(f)))
	}
	if _, err := schemaKeys("not json"); err == nil {
		t.Error("schemaKeys accepted a schema that is not JSON")
	}
}

// TestCommandEnv: an assignment's command and env go to a provider whose
// schema names them or names nothing; one naming other keys only
// (provider-libvirt) gets neither, and a command or env for it is refused
// saying so rather than sent and refused as an unknown key.
func TestCommandEnv(t *testing.T) {
	libvirt := map[string]bool{"image": true, "address": true, "cpu_policy": true}
	for _, tc := range []struct {
		name    string
		as      *unyov1.Assignment
		keys    map[string]bool
		want    []string
		wantErr string
	}{
		{"exec", &unyov1.Assignment{Command: []string{"sleep", "9"}, Env: map[string]string{"A": "1"}}, map[string]bool{"command": true, "env": true}, []string{"command", "env"}, ""},
		{"open schema", &unyov1.Assignment{Command: []string{"x"}}, map[string]bool{}, []string{"command"}, ""},
		{"vm", &unyov1.Assignment{Provider: "libvirt"}, libvirt, nil, ""},
		{"vm with a command", &unyov1.Assignment{Provider: "libvirt", Command: []string{"x"}}, libvirt, nil, "provider libvirt takes no command"},
		{"vm with env", &unyov1.Assignment{Provider: "libvirt", Env: map[string]string{"A": "1"}}, libvirt, nil, "provider libvirt takes no environment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := commandEnv(tc.as, tc.keys)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("commandEnv = %v, %v; want an error saying %q", cfg, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(cfg)); !slices.Equal(got, tc.want) {
				t.Errorf("config keys %v, want %v", got, tc.want)
			}
		})
	}
}
