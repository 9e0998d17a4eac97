package manifest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestReadableEnums: enum values become the operators' words at any depth
// (fields, lists of messages); keys keep protojson's order and every other
// value its bytes, even a string that reads like an enum name.
func TestReadableEnums(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		msg      proto.Message
		defaults bool
		want     string
	}{
		{
			name: "alert",
			msg: &unyov1.Alert{
				Id: "a1", Level: unyov1.AlertLevel_ALERT_LEVEL_FATAL, State: unyov1.AlertState_ALERT_STATE_RESOLVED,
				Summary:   "ALERT_STATE_OPEN is just text",
				FirstSeen: timestamppb.New(at),
				History:   []*unyov1.AlertTransition{{From: unyov1.AlertState_ALERT_STATE_OPEN, To: unyov1.AlertState_ALERT_STATE_RESOLVED}},
			},
			want: `{"id":"a1","level":"fatal","state":"resolved","summary":"ALERT_STATE_OPEN is just text","first_seen":"2025-06-01T12:00:00Z","history":[{"from":"open","to":"resolved"}]}`,
		},
		{
			name:     "zero values",
			msg:      &unyov1.AlertTransition{},
			defaults: true,
			want:     `{"from":"unspecified","to":"unspecified","by":"","reason":""}`,
		},
		{
			name: "no enums",
			msg:  &unyov1.PerfData{Label: "LEVEL_CRITICAL"},
			want: `{"label":"LEVEL_CRITICAL"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: tt.defaults}.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadableEnums(b, tt.msg.ProtoReflect().Descriptor())
			if err != nil {
				t.Fatal(err)
			}
			var c bytes.Buffer
			if err := json.Compact(&c, got); err != nil {
				t.Fatal(err)
			}
			if c.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", c.String(), tt.want)
			}
		})
	}
}
