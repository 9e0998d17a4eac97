package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/provision/diagram"
)

// TestDrawRacksForACluster: the cluster view draws the resources the
// cluster's nodes are, and says which nodes have no inventory entry.
func TestDrawRacksForACluster(t *testing.T) {
	objs, err := manifest.DecodeFile("../../provision/diagram/testdata/inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*unyov1.Node{{Name: "n1", Cluster: "c1", Resource: "rack-1-2-storage1"}, {Name: "n2", Cluster: "c1"}}
	var b bytes.Buffer
	if err := drawRacks(&b, diagram.FromObjects(objs), "", "c1", nodes, diagramFlags{format: "text", width: 80}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Racks of cluster c1: 1 rack, 1 resource", "rack-1-2-storage1", "node n2 has no inventory entry"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rack-1-1") {
		t.Errorf("a rack without the cluster's nodes is drawn:\n%s", out)
	}
}

// TestDiagramFlags: bad flag combinations are refused before anything is
// asked of the server, and the diagram's --cluster is its own, not the
// noun's "only this cluster".
func TestDiagramFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"racks", "diagram"}, "give either --floor or --cluster"},
		{[]string{"racks", "diagram", "--floor", "f", "--cluster", "c"}, "give either --floor or --cluster"},
		{[]string{"racks", "diagram", "--cluster", "c", "--format", "dot"}, `--format "dot": racks are drawn as text or svg`},
		{[]string{"racks", "diagram", "--floor", "f", "-o", "json"}, `-o json: diagrams are not lists; use --format text|svg`},
		{[]string{"networks", "diagram"}, "--from RESOURCE is required"},
		{[]string{"networks", "diagram", "--from", "r", "--format", "png"}, `--format "png": networks are drawn as text, svg or dot`},
	}
	for _, tt := range tests {
		root := newRootCommand()
		root.SetArgs(tt.args)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		if err == nil || err.Error() != tt.want {
			t.Errorf("unyo %s: %v, want %s", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
