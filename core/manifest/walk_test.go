package manifest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

// TestWalkTypes runs the descriptor walk over field types Check does not
// use yet, so that later kinds (enums, bools, floats, timestamps...) get
// the same treatment.
func TestWalkTypes(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		yaml string
		want string // protojson of the result, or the errors
	}{
		{
			name: "event",
			msg:  &unyov1.Event{},
			yaml: `
level: LEVEL_WARNING
timed_out: true
sequence: 18446744073709551615
exit_code: -1
duration: 1.5s
started_at: 2025-06-01T12:00:00Z
perfdata: [{label: a, value: .inf, min: 0, max: 1e3}, {label: b, value: "-2.5"}]`,
			want: `{"level":"LEVEL_WARNING","perfdata":[{"label":"a","value":"Infinity","min":0,"max":1000},{"label":"b","value":-2.5}],"exit_code":-1,"timed_out":true,"started_at":"2025-06-01T12:00:00Z","duration":"1.500s","sequence":"18446744073709551615"}`,
		},
		{
			// The words the printer writes, and the generated names of
			// documents printed before those words.
			name: "enum words",
			msg:  &unyov1.Alert{},
			yaml: `{level: Critical, state: ALERT_STATE_ACKNOWLEDGED, history: [{from: open, to: acknowledged}]}`,
			want: `{"level":"ALERT_LEVEL_CRITICAL","state":"ALERT_STATE_ACKNOWLEDGED","history":[{"from":"ALERT_STATE_OPEN","to":"ALERT_STATE_ACKNOWLEDGED"}]}`,
		},
		{
			name: "event errors",
			msg:  &unyov1.Event{},
			yaml: `
level: warn
timed_out: yes
sequence: -1
duration: 5
started_at: [now]
perfdata: [{value: abc}, 3]
capacity: {}`,
			want: `t.yaml: document 1 (line 2): spec.level: unknown event level "warn": expected success, warning or critical
t.yaml: document 1 (line 3): spec.timed_out: expected true or false, got "yes"
t.yaml: document 1 (line 4): spec.sequence: expected a non-negative integer, got the integer -1
t.yaml: document 1 (line 5): spec.duration: expected a string, got the integer 5
t.yaml: document 1 (line 6): spec.started_at: expected a string, got a list
t.yaml: document 1 (line 7): spec.perfdata[0].value: expected a number, got "abc"
t.yaml: document 1 (line 7): spec.perfdata[1]: expected a mapping, got the integer 3
t.yaml: document 1 (line 8): spec.capacity: unknown field (known fields: id, cluster, node, check, level, status, output, long_output, perfdata, exit_code, timed_out, truncated, started_at, duration, received_at, sequence, occurrences, reissue, explanation, silenced_by, labels, stale)`,
		},
		{
			name: "node",
			msg:  &unyov1.Node{},
			yaml: `{capacity: {cpus: 4, memory_bytes: 0x400000000}, state: ready, labels: {a: b}}`,
			want: `{"labels":{"a":"b"},"capacity":{"cpus":4,"memory_bytes":"17179869184"},"state":"NODE_STATE_READY"}`,
		},
		{
			name: "struct",
			msg:  &structpb.Struct{},
			yaml: `{a: 1, b: [true, null, x], c: {d: 2024-01-01}}`,
			want: `{"a":1,"b":[true,null,"x"],"c":{"d":"2024-01-01"}}`,
		},
		{
			name: "struct error",
			msg:  &structpb.Struct{},
			yaml: `{a: .nan}`,
			want: `t.yaml: document 1 (line 1): spec.a: cannot be represented in JSON: the number .nan`,
		},
		{
			name: "wrapper",
			msg:  &wrapperspb.UInt32Value{},
			yaml: `"42"`,
			want: `42`,
		},
		{
			name: "wrapper out of range",
			msg:  &wrapperspb.UInt32Value{},
			yaml: `4294967296`,
			want: `t.yaml: document 1 (line 1): spec: expected a non-negative integer, got the integer 4294967296`,
		},
		{
			name: "bytes",
			msg:  &wrapperspb.BytesValue{},
			yaml: `!!binary aGVsbG8=`,
			want: `"aGVsbG8="`,
		},
		{
			name: "any",
			msg:  &anypb.Any{},
			yaml: `{}`,
			want: `t.yaml: document 1 (line 1): spec: google.protobuf.Any is not supported in manifests`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tt.yaml), &doc); err != nil {
				t.Fatal(err)
			}
			d := &docDecoder{source: "t.yaml", doc: 1, kinds: builtin.Kinds()}
			v, _ := d.message(doc.Content[0], tt.msg.ProtoReflect().Descriptor(), "spec")
			var got string
			if len(d.errs) > 0 {
				got = d.errs.Error()
			} else {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				m := tt.msg.ProtoReflect().New().Interface()
				if err := protojson.Unmarshal(b, m); err != nil {
					t.Fatalf("protojson rejects the walk's output %s: %v", b, err)
				}
				b, _ = protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
				var compact bytes.Buffer
				if err := json.Compact(&compact, b); err != nil {
					t.Fatal(err)
				}
				got = compact.String()
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestProtoError(t *testing.T) {
	err := protojson.Unmarshal([]byte(`{"value": "!!"}`), &wrapperspb.BytesValue{})
	if err == nil {
		t.Fatal("no error")
	}
	if got := protoError(err); strings.Contains(got, "proto:") || strings.Contains(got, "(line") {
		t.Errorf("protoError(%q) = %q", err, got)
	}
}
