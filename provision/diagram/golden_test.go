package diagram

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// fixture is testdata/inventory.yaml, the inventory the goldens draw.
func fixture(t testing.TB) Inventory {
	t.Helper()
	objs, err := manifest.DecodeFile(filepath.Join("testdata", "inventory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return FromObjects(objs)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update)
}

// wellFormed fails the test unless svg parses as XML with an <svg> root.
func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("SVG root element is %q", root)
	}
}

// TestGoldens draws the fixture in every view and format.
func TestGoldens(t *testing.T) {
	inv := fixture(t)
	nodes := []*unyov1.Node{
		{Name: "n1", Resource: "rack-1-1-server1"},
		{Name: "n2", Resource: "rack-1-2-storage1"},
		{Name: "n3"},
	}
	children := func(resource string) []Child {
		if resource == "rack-1-1-server1" {
			return []Child{{Name: "web-0", Kind: "compute"}, {Name: "web-1", Kind: "compute"}}
		}
		return nil
	}
	racks := map[string]func() (*Racks, error){
		"floor":   func() (*Racks, error) { return FloorRacks(inv, "floor-1-1-1", RackOptions{}) },
		"cluster": func() (*Racks, error) { return ClusterRacks(inv, "c1", nodes, RackOptions{Children: children}), nil },
	}
	for name, build := range racks {
		v, err := build()
		if err != nil {
			t.Fatal(err)
		}
		for _, width := range []int{80, 200} {
			var b bytes.Buffer
			if err := RacksText(&b, v, TextOptions{Width: width}); err != nil {
				t.Fatal(err)
			}
			checkWidth(t, b.Bytes(), width)
			golden(t, "racks-"+name+"-"+strconv.Itoa(width)+".txt", b.Bytes())
		}
		var b bytes.Buffer
		if err := RacksSVG(&b, v); err != nil {
			t.Fatal(err)
		}
		wellFormed(t, b.Bytes())
		golden(t, "racks-"+name+".svg", b.Bytes())
	}
	for _, from := range []string{"rack-1-1-server1", "floor-1-1-1-rack-1-1-rack-leaf-router01"} {
		n, err := NetworkFrom(inv, from)
		if err != nil {
			t.Fatal(err)
		}
		var txt, svg, dot bytes.Buffer
		if err := NetworkText(&txt, n, TextOptions{Width: 80}); err != nil {
			t.Fatal(err)
		}
		checkWidth(t, txt.Bytes(), 80)
		if err := NetworkSVG(&svg, n); err != nil {
			t.Fatal(err)
		}
		wellFormed(t, svg.Bytes())
		if err := NetworkDot(&dot, n); err != nil {
			t.Fatal(err)
		}
		golden(t, "network-"+from+".txt", txt.Bytes())
		golden(t, "network-"+from+".svg", svg.Bytes())
		golden(t, "network-"+from+".dot", dot.Bytes())
	}
}

// checkWidth fails the test if a line of text is wider than width columns.
func checkWidth(t *testing.T, text []byte, width int) {
	t.Helper()
	for i, line := range bytes.Split(text, []byte("\n")) {
		if n := runes(string(line)); n > width {
			t.Errorf("line %d is %d columns, wider than %d: %q", i+1, n, width, line)
		}
	}
}

// TestDotRenders: Graphviz reads the dot goldens without a complaint.
func TestDotRenders(t *testing.T) {
	dot := testutil.NeedTool(t, "Graphviz", "apt-get install -y graphviz", "dot")
	paths, err := filepath.Glob(filepath.Join("testdata", "*.dot"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dot goldens: %v", err)
	}
	for _, p := range paths {
		out, err := exec.Command(dot, "-Tsvg", "-o", os.DevNull, p).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("dot -Tsvg %s: %v %s", p, err, out)
		}
	}
}
