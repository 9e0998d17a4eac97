package checks_test

import (
	"testing"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestSelects(t *testing.T) {
	node := map[string]string{"role": "db", "zone": "a"}
	tests := []struct {
		selector map[string]string
		labels   map[string]string
		want     bool
	}{
		{nil, node, true},
		{map[string]string{}, nil, true},
		{map[string]string{"role": "db"}, node, true},
		{map[string]string{"role": "db", "zone": "a"}, node, true},
		{map[string]string{"role": "web"}, node, false},
		{map[string]string{"role": "db", "disk": "ssd"}, node, false},
		{map[string]string{"role": ""}, map[string]string{}, false}, // absent is not empty
		{map[string]string{"role": ""}, map[string]string{"role": ""}, true},
		{map[string]string{"role": "db"}, nil, false},
	}
	for _, tt := range tests {
		d := checks.Definition{NodeSelector: tt.selector}
		if got := d.Selects(tt.labels); got != tt.want {
			t.Errorf("selector %v, labels %v: Selects = %v, want %v", tt.selector, tt.labels, got, tt.want)
		}
	}
}

func TestLevelFor(t *testing.T) {
	const (
		ok       = unyov1.CheckStatus_CHECK_STATUS_OK
		warning  = unyov1.CheckStatus_CHECK_STATUS_WARNING
		critical = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
		unknown  = unyov1.CheckStatus_CHECK_STATUS_UNKNOWN
		lUnspec  = unyov1.Level_LEVEL_UNSPECIFIED
		lSuccess = unyov1.Level_LEVEL_SUCCESS
		lWarning = unyov1.Level_LEVEL_WARNING
		lCrit    = unyov1.Level_LEVEL_CRITICAL
	)
	tests := []struct {
		status       unyov1.CheckStatus
		unknownLevel unyov1.Level
		want         unyov1.Level
	}{
		{ok, lCrit, lSuccess},
		{warning, lCrit, lWarning},
		{critical, lWarning, lCrit},
		{unknown, lCrit, lCrit},
		{unknown, lWarning, lWarning},
		{unknown, lUnspec, lCrit},
		{unyov1.CheckStatus(9), lWarning, lWarning},
	}
	for _, tt := range tests {
		if got := checks.LevelFor(tt.status, tt.unknownLevel); got != tt.want {
			t.Errorf("LevelFor(%v, %v) = %v, want %v", tt.status, tt.unknownLevel, got, tt.want)
		}
	}
}

func TestSpecHash(t *testing.T) {
	compile := func(c *unyov1.Check) checks.Definition {
		t.Helper()
		d, err := checks.Compile(c)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := func() *unyov1.Check {
		return &unyov1.Check{Name: "disk", Revision: 1, Source: "central", Spec: &unyov1.CheckSpec{
			Command:      []string{"check_disk", "-w", "20%"},
			Interval:     "1m",
			Env:          map[string]string{"A": "1", "B": "2", "C": "3"},
			NodeSelector: map[string]string{"role": "db", "zone": "a"},
		}}
	}
	h := compile(base()).SpecHash()
	for range 20 { // map iteration order varies run to run
		if got := compile(base()).SpecHash(); got != h {
			t.Fatalf("hash of the same check changed: %s != %s", got, h)
		}
	}

	same := base()
	same.Revision, same.Source = 99, "local"
	same.Spec.Timeout = "30s" // the default, written out
	if got := compile(same).SpecHash(); got != h {
		t.Errorf("revision, source or an explicit default changed the hash")
	}

	changes := map[string]func(c *unyov1.Check){
		"name":           func(c *unyov1.Check) { c.Name = "disk2" },
		"argument":       func(c *unyov1.Check) { c.Spec.Command[2] = "10%" },
		"argv split":     func(c *unyov1.Check) { c.Spec.Command = []string{"check_disk", "-w 20%"} },
		"interval":       func(c *unyov1.Check) { c.Spec.Interval = "2m" },
		"cron":           func(c *unyov1.Check) { c.Spec.Interval, c.Spec.Cron = "", "@every 1m" },
		"timeout":        func(c *unyov1.Check) { c.Spec.Timeout = "10s" },
		"timeout status": func(c *unyov1.Check) { c.Spec.TimeoutStatus = "critical" },
		"occurrences":    func(c *unyov1.Check) { c.Spec.Occurrences = 2 },
		"reissue":        func(c *unyov1.Check) { c.Spec.Reissue = "1h" },
		"selector":       func(c *unyov1.Check) { c.Spec.NodeSelector["zone"] = "b" },
		"env value":      func(c *unyov1.Check) { c.Spec.Env["A"] = "x" },
		"env key moved":  func(c *unyov1.Check) { c.Spec.Env = map[string]string{"A": "1", "B": "23"} },
		"unknown level":  func(c *unyov1.Check) { c.Spec.UnknownLevel = "warning" },
	}
	for name, change := range changes {
		c := base()
		change(c)
		if compile(c).SpecHash() == h {
			t.Errorf("changing the %s kept the hash", name)
		}
	}
}
