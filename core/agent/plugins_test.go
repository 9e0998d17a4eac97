package agent

import (
	"testing"
	"time"

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
		}, time.Now())
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
