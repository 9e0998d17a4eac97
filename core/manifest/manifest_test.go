package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/testutil"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update)
}

// dump renders decoded objects as indented protojson: exactly what the API
// would receive, independent of Encode.
func dump(t *testing.T, objs []*unyov1.Object) []byte {
	t.Helper()
	items := []json.RawMessage{}
	for _, o := range objs {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, b)
	}
	b, err := json.MarshalIndent(items, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestDecode decodes every testdata/decode/*.yaml and compares the objects,
// or the errors, with the .golden file next to it.
func TestDecode(t *testing.T) {
	inputs, err := filepath.Glob("testdata/decode/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			// Relative to testdata/decode so that messages are stable.
			objs, err := DecodeFile(filepath.Join("testdata", "decode", name+".yaml"))
			var got []byte
			if err != nil {
				if objs != nil {
					t.Errorf("got objects along with an error")
				}
				var list ErrorList
				if !errors.As(err, &list) {
					t.Fatalf("error is not an ErrorList: %v", err)
				}
				got = []byte("error:\n" + err.Error() + "\n")
			} else {
				got = dump(t, objs)
				roundTrip(t, objs)
			}
			golden(t, filepath.Join("decode", name+".golden"), got)
		})
	}
}

// roundTrip checks Decode(Encode(objs)) == objs.
func roundTrip(t *testing.T, objs []*unyov1.Object) {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, objs); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	back, err := Decode(&buf, "encoded")
	if err != nil {
		t.Fatalf("decoding Encode's output: %v\n%s", err, buf.String())
	}
	if len(back) != len(objs) {
		t.Fatalf("round trip: %d objects, want %d", len(back), len(objs))
	}
	for i := range objs {
		if !proto.Equal(back[i], objs[i]) {
			t.Errorf("round trip of object %d:\n got %v\nwant %v", i+1, back[i], objs[i])
		}
	}
}

func sampleObjects() []*unyov1.Object {
	wrap := func(c *unyov1.Check) *unyov1.Object { return &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}} }
	return []*unyov1.Object{
		wrap(&unyov1.Check{
			Name:    "disk",
			Cluster: "dc1",
			Labels:  map[string]string{"team": "infra", "tier": "1", "app.kubernetes.io/name": "web"},
			Spec: &unyov1.CheckSpec{
				Command:      []string{"check_disk", "-w", "20%", "-c", "10%", "-p", "/"},
				Interval:     "1m",
				Timeout:      "10s",
				Occurrences:  3,
				NodeSelector: map[string]string{"role": "web"},
				Env:          map[string]string{"ON": "yes", "NUM": "0x10", "EMPTY": "", "NULL": "null", "DATE": "2024-01-01"},
			},
		}),
		// Strings YAML would otherwise read as other types, and text that
		// needs a block scalar.
		wrap(&unyov1.Check{
			Name: "true",
			Spec: &unyov1.CheckSpec{
				Command: []string{"sh", "-c", "echo 'a: b'\nexit 2\n", "123", "~", "#x", "- y", "*"},
				Cron:    "*/5 * * * *",
			},
		}),
		wrap(&unyov1.Check{Name: "bare"}),
		wrap(&unyov1.Check{Name: "empty-spec", Spec: &unyov1.CheckSpec{}}),
	}
}

func TestEncode(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sampleObjects()); err != nil {
		t.Fatal(err)
	}
	golden(t, "encode.golden.yaml", buf.Bytes())
	roundTrip(t, sampleObjects())
}

func TestEncodeDropsServerFields(t *testing.T) {
	c := sampleObjects()[0]
	c.GetCheck().Revision = 7
	c.GetCheck().Source = "central"
	b, err := MarshalJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, "revision") || strings.Contains(s, "source") || !strings.HasPrefix(s, `{"kind":"Check","name":"disk","cluster":"dc1",`) {
		t.Errorf("MarshalJSON = %s", s)
	}
	if err := Encode(&bytes.Buffer{}, []*unyov1.Object{{}}); err == nil || err.Error() != "object 1: object has no kind" {
		t.Errorf("Encode of an empty object: %v", err)
	}
}

func TestDecodeDocument(t *testing.T) {
	tests := []struct {
		name    string
		doc     map[string]any
		check   bool // use DecodeCheck
		want    string
		wantErr string
	}{
		{
			name:  "check",
			doc:   map[string]any{"kind": "Check", "name": "disk", "spec": map[string]any{"command": []any{"check_disk", "-w", "20%"}, "interval": "1m", "occurrences": 2}},
			want:  `{"check":{"name":"disk","spec":{"command":["check_disk","-w","20%"],"interval":"1m","occurrences":2}}}`,
			check: false,
		},
		{
			name:  "implied kind",
			doc:   map[string]any{"name": "load", "spec": map[string]any{"command": []string{"check_load"}}},
			check: true,
			want:  `{"check":{"name":"load","spec":{"command":["check_load"]}}}`,
		},
		{
			name:    "kind required outside DecodeCheck",
			doc:     map[string]any{"name": "load"},
			wantErr: `agent.yaml: checks[0], "load": kind: required (known kinds: Check, EventRule, Maintenance, Region, Datacenter, Floor, Rack, PhysicalResource, Cluster, Flavor, Image, Network, RegionService, Compute, Loadbalancer)`,
		},
		{
			name:    "other kind where checks are expected",
			doc:     map[string]any{"kind": "EventRule", "name": "page"},
			check:   true,
			wantErr: `agent.yaml: checks[0], EventRule "page": kind: expected Check here, got "EventRule"`,
		},
		{
			name:  "errors have no lines",
			doc:   map[string]any{"name": "disk", "labels": map[string]any{"port": 8080}, "spec": map[string]any{"intervall": "1m", "occurrences": "three"}},
			check: true,
			wantErr: `agent.yaml: checks[0], Check "disk": labels.port: expected a string, got the integer 8080 (quote it: "8080")` + "\n" +
				`agent.yaml: checks[0], Check "disk": spec.intervall: unknown field, did you mean interval? (known fields: command, interval, cron, timeout, timeout_status, occurrences, reissue, node_selector, env, unknown_level, metric, log, plugin, metrics_format, ttl)` + "\n" +
				`agent.yaml: checks[0], Check "disk": spec.occurrences: expected an integer, got "three"`,
		},
		{
			name:    "empty",
			doc:     nil,
			check:   true,
			wantErr: `agent.yaml: checks[0]: empty document`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				o   *unyov1.Object
				err error
			)
			if tt.check {
				var c *unyov1.Check
				if c, err = DecodeCheck(tt.doc, "agent.yaml: checks[0]"); c != nil {
					o = &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}}
				}
			} else {
				o, err = DecodeDocument(tt.doc, "agent.yaml: checks[0]")
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error:\n got %v\nwant %s", err, tt.wantErr)
				}
				if o != nil {
					t.Errorf("got an object along with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := new(unyov1.Object)
			if err := protojson.Unmarshal([]byte(tt.want), want); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(o, want) {
				t.Errorf("got %v\nwant %v", o, want)
			}
		})
	}
}

func TestDecodeSource(t *testing.T) {
	// Parse errors count empty documents and keep the line in the file.
	in := "kind: Check\nname: a\n---\n---\n\nkind: Check\nname: [b\n"
	_, err := Decode(strings.NewReader(in), "stdin")
	want := "stdin: document 3 (line 7): invalid YAML: did not find expected ',' or ']'"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Document != 3 || e.Line != 7 || e.Source != "stdin" {
		t.Errorf("errors.As(*Error) = %+v", e)
	}
	objs, err := Decode(strings.NewReader(""), "empty")
	if err != nil || len(objs) != 0 {
		t.Errorf("empty input: %v, %v", objs, err)
	}
}

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		in   string
		want []int // start lines
	}{
		{"", []int{1}},
		{"a: 1\n", []int{1}},
		{"# c\n%YAML 1.2\n---\na: 1\n---\nb: 2\n", []int{1, 5}},
		{"a: 1\n---\n---\r\nb: 2\n--- # x\n", []int{1, 2, 3, 5}},
		{"a: |\n  ---\n----\n--- \n", []int{1, 4}}, // indented or longer dashes are content
	}
	for _, tt := range tests {
		var got []int
		for _, c := range splitDocuments([]byte(tt.in)) {
			got = append(got, c.line)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("splitDocuments(%q) starts at lines %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"command", "interval", "cron", "timeout", "node_selector"}
	for in, want := range map[string]string{
		"intervall":    "interval",
		"nodeSelector": "node_selector",
		"NodeSelector": "node_selector",
		"comand":       "command",
		"retries":      "",
		"cronn":        "cron",
		"x":            "",
	} {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
