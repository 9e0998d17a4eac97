package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

func TestNamedRefs(t *testing.T) {
	tests := []struct {
		args []string
		want string // refs, or the error
	}{
		{[]string{"check", "disk", "load"}, "[Check/disk@dc1 Check/load@dc1]"},
		{[]string{"rules", "page"}, "[EventRule/page@dc1]"},
		{[]string{"maint", "patch"}, "[Maintenance/patch@dc1]"},
		{[]string{"chek", "disk"}, `unknown kind "chek" (known kinds: Check, EventRule, Maintenance, Region, Datacenter, Floor, Rack, PhysicalResource, Cluster, Flavor, Image, Network, RegionService, Compute, Loadbalancer)`},
	}
	for _, tt := range tests {
		refs, err := namedRefs(tt.args, "dc1")
		got := fmt.Sprint(err)
		if err == nil {
			var parts []string
			for _, r := range refs {
				parts = append(parts, r.GetKind()+"/"+r.GetName()+"@"+r.GetCluster())
			}
			got = "[" + strings.Join(parts, " ") + "]"
		}
		if got != tt.want {
			t.Errorf("namedRefs(%q) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestKindCommands: every registered kind gets its noun with ls and get
// (Cluster's is the hand-written `unyo clusters`, which has both);
// maintenance adds start and end, racks diagram, networks diagram,
// allocate and release.
func TestKindCommands(t *testing.T) {
	cmds := newKindCommands(&globals{})
	if len(cmds) != len(builtin.Kinds().Names())-1 {
		t.Fatalf("%d kind commands for %d kinds (one, Cluster, hand-written)", len(cmds), len(builtin.Kinds().Names()))
	}
	var clusterSubs []string
	for _, s := range newClustersCommand(&globals{}).Commands() {
		clusterSubs = append(clusterSubs, s.Name())
	}
	if fmt.Sprint(clusterSubs) != "[add delete get ls]" {
		t.Errorf("unyo clusters has %v, want add, delete, get and ls", clusterSubs)
	}
	for _, c := range cmds {
		var subs []string
		for _, s := range c.Commands() {
			subs = append(subs, s.Name())
		}
		want := []string{"get", "ls"}
		switch c.Name() {
		case "maintenance":
			want = []string{"end", "get", "ls", "start"}
		case "racks":
			want = []string{"diagram", "get", "ls"}
		case "networks":
			want = []string{"allocate", "diagram", "get", "ls", "release"}
		case "services":
			want = []string{"delete", "get", "ls", "plan", "rollout", "scale"}
		case "computes":
			want = []string{"delete", "get", "ls"}
		}
		if !slices.Equal(subs, want) {
			t.Errorf("unyo %s: subcommands %v, want %v", c.Name(), subs, want)
		}
	}
}
