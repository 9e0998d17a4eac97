package agent

import (
	"maps"
	"slices"
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
