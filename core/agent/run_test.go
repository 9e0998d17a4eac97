package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/checks"
)

// A perfdata value that the output cap cuts (`cut=123456789` kept as
// `cut=1234`) must not reach the event as a wrong number: the cut item is
// dropped and named in the long output.
func TestOutputCapDropsTheCutPerfdataItem(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "check_cut")
	// "OK | good=1 cut=123456789": with a cap ending four digits into the
	// second value.
	out := "OK | good=1 cut=123456789"
	capAt := strings.Index(out, "cut=") + len("cut=1234")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s' '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{NodeName: "n1", ClusterURL: "http://127.0.0.1:1", DataDir: t.TempDir(), MaxOutput: capAt,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.closeSpools()
	e, _ := a.execute(context.Background(), checks.Definition{Name: "cut", Command: []string{script}, Timeout: 10 * time.Second, MetricsFormat: checks.MetricsNagios})
	if !e.GetTruncated() {
		t.Fatalf("the run was not marked truncated (output %q)", e.GetOutput())
	}
	var labels []string
	for _, p := range e.GetPerfdata() {
		labels = append(labels, p.GetLabel())
		if p.GetLabel() == "cut" {
			t.Errorf("the cut item was kept with value %v", p.GetValue())
		}
	}
	if len(labels) != 1 || labels[0] != "good" {
		t.Errorf("perfdata labels = %v, want [good]", labels)
	}
	if want := `perfdata "cut=1234": cut off by the output size limit; dropped`; !strings.Contains(e.GetLongOutput(), want) {
		t.Errorf("long output %q does not name the dropped item (%s)", e.GetLongOutput(), want)
	}
}
