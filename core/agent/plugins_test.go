package agent

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

func TestMapPluginResult(t *testing.T) {
	minV := 0.0
	for _, tt := range []struct {
		in   pluginv1.CheckStatus
		want unyov1.CheckStatus
	}{
		{pluginv1.CheckStatus_CHECK_STATUS_OK, unyov1.CheckStatus_CHECK_STATUS_OK},
		{pluginv1.CheckStatus_CHECK_STATUS_WARNING, unyov1.CheckStatus_CHECK_STATUS_WARNING},
		{pluginv1.CheckStatus_CHECK_STATUS_CRITICAL, unyov1.CheckStatus_CHECK_STATUS_CRITICAL},
		{pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN, unyov1.CheckStatus_CHECK_STATUS_UNKNOWN},
		{pluginv1.CheckStatus_CHECK_STATUS_UNSPECIFIED, unyov1.CheckStatus_CHECK_STATUS_UNKNOWN},
	} {
		e := &unyov1.Event{}
		mapPluginResult(e, &pluginv1.CheckResult{
			Status: tt.in, Output: "TCP OK - fine\nmore\nlines", OutputTruncated: true,
			Duration: durationpb.New(1500 * time.Millisecond),
			Metrics:  []*pluginv1.Metric{{Label: "time", Value: 0.01, Unit: "s", Warn: "1", Crit: "2", Min: &minV}},
		}, time.Now(), 64<<10)
		if e.Status != tt.want || e.ExitCode != int32(tt.want) {
			t.Errorf("%v: status %v exit %d, want %v", tt.in, e.Status, e.ExitCode, tt.want)
		}
		if tt.in != pluginv1.CheckStatus_CHECK_STATUS_UNSPECIFIED && e.Output != "TCP OK - fine" {
			t.Errorf("output %q", e.Output)
		}
		if e.LongOutput != "more\nlines" || !e.Truncated || e.Duration.AsDuration() != 1500*time.Millisecond || e.StartedAt == nil {
			t.Errorf("got %v", e)
		}
		if len(e.Perfdata) != 1 || e.Perfdata[0].Uom != "s" || e.Perfdata[0].Crit != "2" || e.Perfdata[0].GetMin() != 0 || e.Perfdata[0].Min == nil {
			t.Errorf("perfdata %v", e.Perfdata)
		}
	}
}

// TestMapPluginResultBoundsOutput: the agent cuts a plugin's output at
// agent.max_output itself and marks it truncated, whatever the plugin
// claimed.
func TestMapPluginResultBoundsOutput(t *testing.T) {
	for _, tt := range []struct {
		name, output  string
		claimed, want bool
	}{
		{"short", "OK", false, false},
		{"exactly the bound", strings.Repeat("x", 16), false, false},
		{"over the bound, unclaimed", "OK\n" + strings.Repeat("é", 16), false, true},
		{"claimed by the plugin", "OK", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &unyov1.Event{}
			mapPluginResult(e, &pluginv1.CheckResult{Status: pluginv1.CheckStatus_CHECK_STATUS_OK, Output: tt.output, OutputTruncated: tt.claimed}, time.Now(), 16)
			if n := len(e.Output) + len(e.LongOutput); n > 16 {
				t.Errorf("kept %d bytes of output, bound 16", n)
			}
			if !utf8.ValidString(e.LongOutput) {
				t.Errorf("long output cut inside a character: %q", e.LongOutput)
			}
			if e.Truncated != tt.want {
				t.Errorf("truncated %v, want %v", e.Truncated, tt.want)
			}
		})
	}
}
