package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestParseAge(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1h", time.Hour, true},
		{"30m", 30 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"2d", 48 * time.Hour, true},
		{"0d", 0, true},
		{"2d3h", 0, false}, // days stand alone
		{"d", 0, false},
		{"2 d", 0, false},
		{"", 0, false},
		{"soon", 0, false},
	} {
		got, err := parseAge(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseAge(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseWhen(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Time // zero: nil
		wantErr string
	}{
		{"", time.Time{}, ""},
		{"2026-04-30T10:00:00Z", time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC), ""},
		{"2026-04-30T19:00:00+09:00", time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC), ""},
		{"1h", now.Add(-time.Hour), ""},
		{"2d", now.Add(-48 * time.Hour), ""},
		{"yesterday", time.Time{}, `--since "yesterday": expected a time such as 2026-05-01T10:00:00Z or an age such as 1h or 2d`},
		{"2026-04-30", time.Time{}, `--since "2026-04-30"`},
	} {
		got, err := parseWhen("since", tc.in, now)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseWhen(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("parseWhen(%q): %v", tc.in, err)
		case tc.want.IsZero() != (got == nil):
			t.Errorf("parseWhen(%q) = %v, want %v", tc.in, got, tc.want)
		case got != nil && !got.AsTime().Equal(tc.want):
			t.Errorf("parseWhen(%q) = %v, want %v", tc.in, got.AsTime(), tc.want)
		}
	}
}

func TestParseSpanNamesTheFlag(t *testing.T) {
	if _, _, err := parseSpan("from", "1h", "to", "later", now); err == nil || !strings.HasPrefix(err.Error(), `--to "later"`) {
		t.Errorf("error = %v, want it to name --to", err)
	}
	f, u, err := parseSpan("from", "2h", "to", "1h", now)
	if err != nil || !f.AsTime().Equal(now.Add(-2*time.Hour)) || !u.AsTime().Equal(now.Add(-time.Hour)) {
		t.Errorf("parseSpan = %v, %v, %v", f, u, err)
	}
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                    nil,
		"a":                   {"a"},
		"a,b":                 {"a", "b"},
		" a , ,b ,":           {"a", "b"},
		",,":                  nil,
		"critical, warning  ": {"critical", "warning"},
	} {
		if got := splitList(in); !slices.Equal(got, want) {
			t.Errorf("splitList(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAlertFilterRequest(t *testing.T) {
	all := []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED, unyov1.AlertState_ALERT_STATE_RESOLVED, unyov1.AlertState_ALERT_STATE_CLOSED}
	for _, tc := range []struct {
		name    string
		f       *alertFilter
		want    *unyov1.ListAlertsRequest
		wantErr string
	}{
		{"none", &alertFilter{}, &unyov1.ListAlertsRequest{}, ""},
		{"levels and states, any case", &alertFilter{req: unyov1.ListAlertsRequest{Cluster: "eu", Node: "web1", Check: "disk"}, levels: "Fatal, critical", states: "OPEN,acknowledged"},
			&unyov1.ListAlertsRequest{Cluster: "eu", Node: "web1", Check: "disk",
				Levels: []unyov1.AlertLevel{unyov1.AlertLevel_ALERT_LEVEL_FATAL, unyov1.AlertLevel_ALERT_LEVEL_CRITICAL},
				States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED}}, ""},
		{"--all", &alertFilter{all: true}, &unyov1.ListAlertsRequest{States: all}, ""},
		{"--all with --state", &alertFilter{all: true, states: "closed"},
			&unyov1.ListAlertsRequest{States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_CLOSED}}, ""},
		{"event level", &alertFilter{levels: "success"}, nil, `--level: unknown alert level "success": expected fatal, critical or warning`},
		{"unknown state", &alertFilter{states: "open,gone"}, nil, `--state: unknown alert state "gone": expected open, acknowledged, resolved or closed`},
	} {
		got, err := tc.f.request()
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: error = %v, want %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !proto.Equal(got, tc.want) {
			t.Errorf("%s: request() = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestOutputFormats(t *testing.T) {
	for _, tc := range []struct {
		format string
		ok     bool
	}{
		{"", true}, {"table", true}, {"json", true}, {"yaml", true}, {"YAML", false}, {"wide", false},
	} {
		if err := printer.CheckFormat(tc.format); (err == nil) != tc.ok {
			t.Errorf("-o %q: %v, want ok=%v", tc.format, err, tc.ok)
		}
	}
	if err := checkReportFormat("table"); err != nil {
		t.Errorf("plugin conformance -o table: %v", err)
	}
	if err := checkReportFormat("html"); err == nil || !strings.Contains(err.Error(), `"html"`) {
		t.Errorf("plugin conformance -o html: %v, want an error naming it", err)
	}
}

func TestOperator(t *testing.T) {
	if got := operator("alice"); got != "alice" {
		t.Errorf("operator(alice) = %q: --by comes first", got)
	}
	t.Setenv("UNYO_USER", "bob")
	if got := operator(""); got != "bob" {
		t.Errorf("operator() = %q, want UNYO_USER", got)
	}
}
