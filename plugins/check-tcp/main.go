// Command unyo-check-tcp is the bundled TCP check plugin: connect to
// host:port, optionally send a string and expect a reply containing
// another, and grade the connect+reply latency against thresholds.
package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const version = "1.0.0"

// Target is one check's target.
type Target struct {
	Address string `json:"address"`
	Send    string `json:"send,omitempty"`
	Expect  string `json:"expect,omitempty"`
	// Latency thresholds; 0 disables.
	Warning  sdk.Duration `json:"warning,omitempty"`
	Critical sdk.Duration `json:"critical,omitempty"`
	// MaxBytes read while waiting for Expect (4096).
	MaxBytes int `json:"max_bytes,omitempty"`
}

type tcpCheck struct{}

func (tcpCheck) Info() sdk.Info {
	return sdk.Info{Name: "tcp", Version: version, Description: "TCP connect, send/expect and latency check"}
}

func (tcpCheck) ConfigSchema() string { return `{"type":"object","additionalProperties":false}` }

func (tcpCheck) Configure(_ context.Context, c map[string]any) error {
	var none struct{}
	return sdk.Decode(c, &none)
}

func (tcpCheck) Probe(context.Context) (bool, string) { return true, "" }

func parseTarget(m map[string]any) (Target, error) {
	var t Target
	if err := sdk.Decode(m, &t); err != nil {
		return t, err
	}
	if _, _, err := net.SplitHostPort(t.Address); err != nil {
		return t, sdk.Invalid("address", "must be host:port: %v", err)
	}
	if t.MaxBytes <= 0 {
		t.MaxBytes = 4096
	}
	return t, nil
}

func (tcpCheck) Check(ctx context.Context, req sdk.CheckRequest) (sdk.CheckResult, error) {
	t, err := parseTarget(req.Target)
	if err != nil {
		return sdk.CheckResult{}, err
	}
	start := time.Now()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", t.Address)
	if err != nil {
		return sdk.CheckResult{Status: sdk.Critical, Output: fmt.Sprintf("TCP CRITICAL - cannot connect to %s: %v", t.Address, err)}, nil
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if t.Send != "" {
		if _, err := conn.Write([]byte(t.Send)); err != nil {
			return sdk.CheckResult{Status: sdk.Critical, Output: fmt.Sprintf("TCP CRITICAL - cannot send to %s: %v", t.Address, err)}, nil
		}
	}
	if t.Expect != "" {
		buf := make([]byte, 0, t.MaxBytes)
		tmp := make([]byte, 512)
		for !strings.Contains(string(buf), t.Expect) {
			if len(buf) >= t.MaxBytes {
				return sdk.CheckResult{Status: sdk.Critical, Output: fmt.Sprintf("TCP CRITICAL - %s did not answer %q within %d bytes: %q", t.Address, t.Expect, t.MaxBytes, buf)}, nil
			}
			n, err := conn.Read(tmp[:min(len(tmp), t.MaxBytes-len(buf))])
			buf = append(buf, tmp[:n]...)
			if err != nil && !strings.Contains(string(buf), t.Expect) {
				return sdk.CheckResult{Status: sdk.Critical, Output: fmt.Sprintf("TCP CRITICAL - %s did not answer %q: %v (got %q)", t.Address, t.Expect, err, buf)}, nil
			}
		}
	}
	took := time.Since(start)
	status, word := grade(took, time.Duration(t.Warning), time.Duration(t.Critical))
	return sdk.CheckResult{
		Status: status,
		Output: fmt.Sprintf("TCP %s - %.3f second response time on %s", word, took.Seconds(), t.Address),
		Metrics: []sdk.Metric{{Label: "time", Value: took.Seconds(), Unit: "s",
			Warn: secs(time.Duration(t.Warning)), Crit: secs(time.Duration(t.Critical)), Min: ptr(0)}},
	}, nil
}

func grade(took, warn, crit time.Duration) (pluginv1.CheckStatus, string) {
	switch {
	case crit > 0 && took >= crit:
		return sdk.Critical, "CRITICAL"
	case warn > 0 && took >= warn:
		return sdk.Warning, "WARNING"
	}
	return sdk.OK, "OK"
}

func secs(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("%g", d.Seconds())
}

func ptr(f float64) *float64 { return &f }

func main() { sdk.Serve(tcpCheck{}) }
