package conformance

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// binDir holds the plugin binaries, built once for the whole test run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "unyo-conformance-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = testbin.Build(dir,
		[]string{"../check-http", "../check-tcp", "../action-exec", "../action-smtp", "../provider-exec", "./testdata/unyo-check-broken", "./testdata/unyo-check-defective", "./testdata/unyo-action-defective"},
		[]string{"unyo-check-http", "unyo-check-tcp", "unyo-action-exec", "unyo-action-smtp", "unyo-provider-exec", "unyo-check-broken", "unyo-check-defective", "unyo-action-defective"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func fixtures(t *testing.T, name string) *Fixtures {
	t.Helper()
	fx, err := LoadFixtures(filepath.Join("testdata", "fixtures", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// TestBundledPlugins: every bundled plugin passes every case that applies.
func TestBundledPlugins(t *testing.T) {
	for _, name := range []string{"check-http", "check-tcp", "action-exec", "action-smtp", "provider-exec"} {
		t.Run(name, func(t *testing.T) {
			Run(t, Binary(filepath.Join(binDir, "unyo-"+name), fixtures(t, name)))
		})
	}
}

// TestBrokenPluginFails: the harness can fail, and names the broken cases.
func TestBrokenPluginFails(t *testing.T) {
	rep, err := Execute(t.Context(), Binary(filepath.Join(binDir, "unyo-check-broken"), fixtures(t, "check-broken")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = rep.WriteTable(&buf)
	t.Log("\n" + buf.String())
	if rep.OK() {
		t.Fatal("the broken plugin passed")
	}
	want := map[string]bool{"base/no_fd_or_memory_growth": true, "check/no_zombie_children": true}
	for _, c := range rep.Cases {
		if want[c.Name] != (c.Outcome == Fail) {
			t.Errorf("case %s: %s (%s)", c.Name, c.Outcome, c.Message)
		}
	}
	if c, _ := rep.Case("base/no_fd_or_memory_growth"); !strings.Contains(c.Message, "open descriptors grew") {
		t.Errorf("growth failure does not say what grew: %q", c.Message)
	}
}

// defects are the defects of testdata/unyo-check-defective (a check
// plugin written without the SDK) and testdata/unyo-action-defective,
// each with the one case that must fail and what its message must say.
var defects = []struct{ kind, defect, failCase, message string }{
	{"check", "schema-invalid", "base/config_schema", "is not a valid JSON Schema"},
	{"check", "advertises-v2", "base/api_versions_served", "advertises API v2 but does not serve unyo.plugin.v2.Plugin"},
	{"check", "ignores-sigterm", "base/exit_on_sigterm", "after SIGTERM"},
	{"check", "unbounded-output", "check/output_bounded", "over the protocol's 64 KiB"},
	{"check", "stream-ends-on-error", "check/stream_survives_bad_request", "ended the whole RunStream"},
	{"check", "crashes-late", "base/long_run", "exit status 2; its stderr: panic: crashes-late: call 1500"},
	{"check", "leaks-goroutine", "base/no_fd_or_memory_growth", "goroutines grew"},
	{"check", "leaks-fd-on-timeout", "base/no_fd_or_memory_growth", "open descriptors grew"},
	{"check", "leaks-fd-on-cancel", "base/no_fd_or_memory_growth", "open descriptors grew"},
	{"check", "noisy-stdout", "base/quiet_stdout", "plugin wrote to stdout"},
	{"check", "accepts-any-config", "base/configure_invalid", "invalid config: got <nil>, want INVALID_ARGUMENT"},
	{"check", "runs-unconfigured", "base/not_configured", "check call before Configure: got rpc error: code = InvalidArgument"},
	{"check", "accepts-api-v99", "base/version_negotiation", "Configure with API v99: got <nil>, want FAILED_PRECONDITION"},
	{"check", "describe-mismatch", "base/describe", "describe says describe-mismatch 0.0.2, Info says describe-mismatch 0.0.1"},
	{"check", "spawns-on-cancel", "check/no_zombie_children", "child processes still running"},
	// The raw provider: unyo-check-defective installed as a provider.
	{"provider", "watch-unimplemented", "provider/watch", "Watch is advertised in Schema's operations but answered UNIMPLEMENTED"},
	{"provider", "fingerprint-unimplemented", "provider/fingerprint", "Fingerprint is advertised in Schema's operations but answered UNIMPLEMENTED"},
	{"provider", "create-not-idempotent", "provider/no_strays", "strays: duplicates"},
	{"provider", "list-any-label", "provider/list_by_labels", "must match ALL the labels"},
	{"action", "acts-after-timeout", "action/timeout", "acted after it reported TIMED_OUT"},
	{"action", "acts-after-cancel", "action/cancel", "acted after it reported CANCELLED"},
	// Observed through the helper HTTP server, with no effects file.
	{"action-http", "acts-in-dry-run", "action/dry_run_no_side_effect", "dry runs acted 2 times"},
	{"action-http", "acts-after-timeout", "action/timeout", "acted after it reported TIMED_OUT"},
	// The raw action's word (replayed=true) against the helper server's count.
	{"action-raw", "replays-by-rerunning", "action/idempotent_sequential", "two Executes with one key acted 2 times, want once"},
}

// wantOnlyFailure: exactly failCase failed ("" for none), with a message
// containing message.
func wantOnlyFailure(t *testing.T, rep *Report, failCase, message string) {
	t.Helper()
	for _, c := range rep.Cases {
		if (c.Name == failCase) != (c.Outcome == Fail) {
			t.Errorf("case %s: %s (%s)", c.Name, c.Outcome, c.Message)
		}
	}
	if c, _ := rep.Case(failCase); !strings.Contains(c.Message, message) {
		t.Errorf("%s says %q, want it to name the defect (%q)", failCase, c.Message, message)
	}
}

// defectFixtures are the fixtures of the defective plugin of kind;
// "action-http" is the action plugin acting on the helper HTTP server,
// "action-raw" the raw one.
func defectFixtures(t *testing.T, kind string) *Fixtures {
	switch kind {
	case "action-http":
		return fixtures(t, "action-defective-http")
	case "action-raw":
		return fixtures(t, "action-raw-defective")
	}
	return fixtures(t, kind+"-defective")
}

// defectiveBinaries are the binaries that serve each kind of defect: the
// raw provider and the raw action ("action-raw") are the raw check plugin
// (no SDK) under a provider's or an action's name.
var defectiveBinaries = map[string]string{"check": "unyo-check-defective", "provider": "unyo-check-defective",
	"action": "unyo-action-defective", "action-http": "unyo-action-defective", "action-raw": "unyo-check-defective"}

// install links the defective plugin of kind under name.
func install(t *testing.T, kind, name string) string {
	bin := defectiveBinaries[kind]
	kind, _, _ = strings.Cut(kind, "-")
	path := filepath.Join(t.TempDir(), "unyo-"+kind+"-"+name)
	if err := os.Link(filepath.Join(binDir, bin), path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDefectivePlugins: the correct builds pass every case; each defect
// fails exactly its case, with a message naming the defect.
func TestDefectivePlugins(t *testing.T) {
	for _, kind := range []string{"check", "provider", "action", "action-http", "action-raw"} {
		t.Run(kind+"/correct", func(t *testing.T) {
			Run(t, Binary(install(t, kind, "correct"), defectFixtures(t, kind)))
		})
	}
	for _, d := range defects {
		t.Run(d.kind+"/"+d.defect, func(t *testing.T) {
			rep, err := Execute(t.Context(), Binary(install(t, d.kind, d.defect), defectFixtures(t, d.kind)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			wantOnlyFailure(t, rep, d.failCase, d.message)
		})
	}
}

// TestWithoutFixtures: correct plugins that need a config fail nothing
// without fixtures; the cases that needed one are skipped naming it, and
// the report says which fixture enables which.
func TestWithoutFixtures(t *testing.T) {
	for _, name := range []string{"action-exec", "provider-exec"} {
		t.Run(name, func(t *testing.T) {
			rep, err := Execute(t.Context(), Binary(filepath.Join(binDir, "unyo-"+name), nil), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_ = rep.WriteTable(&buf)
			if rep.Failed != 0 {
				t.Errorf("a correct plugin without fixtures failed:\n%s", buf.String())
			}
			if len(rep.MissingFixtures()["config"]) == 0 || !strings.Contains(buf.String(), "fixtures that would enable skipped cases:\n") || !strings.Contains(buf.String(), "\n  config: base/configure_valid, ") {
				t.Errorf("the report does not say that the config fixture would enable skipped cases:\n%s", buf.String())
			}
		})
	}
}

// TestReportFormats: JSON round-trips and JUnit is well-formed XML with a
// failure element per failed case.
func TestReportFormats(t *testing.T) {
	rep, err := Execute(t.Context(), Binary(filepath.Join(binDir, "unyo-check-broken"), fixtures(t, "check-broken")),
		Options{Run: regexp.MustCompile(`^(base/info|check/no_zombie_children|check/status_warning)$`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 3 || rep.Failed != 1 || rep.Passed != 2 {
		t.Fatalf("report: %+v", rep)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Failed != 1 || back.Cases[0].Name != "base/info" {
		t.Fatalf("json: %v %+v", err, back)
	}
	var x bytes.Buffer
	if err := rep.WriteJUnit(&x); err != nil {
		t.Fatal(err)
	}
	var suites junitSuites
	if err := xml.Unmarshal(x.Bytes(), &suites); err != nil {
		t.Fatalf("junit: %v\n%s", err, x.String())
	}
	s := suites.Suites[0]
	if s.Tests != 3 || s.Failures != 1 || len(s.Cases) != 3 {
		t.Fatalf("junit suite: %+v", s)
	}
	for _, c := range s.Cases {
		if (c.Failure != nil) != (c.Name == "check/no_zombie_children") {
			t.Errorf("junit case %s: failure %v", c.Name, c.Failure)
		}
	}
}

// TestInProcess: the same cases against an implementation in this
// process; the ones needing a process of their own are skipped.
func TestInProcess(t *testing.T) {
	store := &memStore{m: map[string]sdk.Resource{}}
	rep := RunWith(t, InProcess(func() sdk.Plugin { return &memProvider{s: store} }, memFixtures()), Options{})
	if c, _ := rep.Case("base/exit_on_parent_death"); c.Outcome != Skip {
		t.Errorf("parent death in-process: %v", c)
	}
	if len(store.m) != 0 {
		t.Errorf("resources left behind: %v", store.m)
	}
}

// TestProviderDefects: each provider defect fails exactly its case with a
// message naming it; the correct provider passed in TestInProcess.
func TestProviderDefects(t *testing.T) {
	for _, d := range []struct{ defect, failCase, message string }{
		{updateNotStored, "provider/update", "answered but not stored"},
		{statsUnknownOK, "provider/stats", "Stats of an unknown id: got <nil>, want NOT_FOUND"},
		{listAnyLabel, "provider/list_by_labels", "must match ALL the labels"},
		{deleteLeavesStray, "provider/no_strays", "strays"},
		{watchEndsAtOnce, "provider/watch", "Watch ended while the harness was still watching"},
	} {
		t.Run(d.defect, func(t *testing.T) {
			store := &memStore{m: map[string]sdk.Resource{}}
			rep, err := Execute(t.Context(), InProcess(func() sdk.Plugin { return &memProvider{s: store, defect: d.defect} }, memFixtures()), Options{})
			if err != nil {
				t.Fatal(err)
			}
			wantOnlyFailure(t, rep, d.failCase, d.message)
			if len(store.m)+len(store.strays) != 0 {
				t.Errorf("resources left behind: %v %v", store.m, store.strays)
			}
		})
	}
}

func memFixtures() *Fixtures {
	return &Fixtures{
		Provider: ProviderFixtures{Resource: map[string]any{"size": 1.0}, Other: map[string]any{"size": 2.0},
			Invalid: map[string]any{"size": -1.0}, Failing: map[string]any{"size": 13.0}},
	}
}

// TestCleanupAfterFailure: resources are deleted even when cases fail.
func TestCleanupAfterFailure(t *testing.T) {
	store := &memStore{m: map[string]sdk.Resource{}}
	rep, err := Execute(t.Context(), InProcess(func() sdk.Plugin { return &memProvider{s: store, forgetful: true} }, &Fixtures{
		Provider: ProviderFixtures{Resource: map[string]any{"size": 1.0}},
	}), Options{Run: regexp.MustCompile(`^provider/`)})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := rep.Case("provider/lifecycle"); c.Outcome != Fail {
		t.Errorf("lifecycle against a provider that changes configs: %+v", c)
	}
	if len(store.m) != 0 {
		t.Errorf("resources left behind by failed cases: %v", store.m)
	}
}

func TestCheckBinary(t *testing.T) {
	rep := CheckBinary(t.Context(), filepath.Join(binDir, "unyo-check-tcp"))
	if !rep.OK() || rep.Passed != 7 || rep.Plugin != "tcp" {
		var buf bytes.Buffer
		_ = rep.WriteTable(&buf)
		t.Fatalf("check-tcp:\n%s", buf.String())
	}
	// A program that is not a plugin: wrong name, no describe.
	notPlugin := filepath.Join(t.TempDir(), "unyo-check-fake")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep = CheckBinary(t.Context(), notPlugin)
	for _, name := range []string{"check/describe", "check/refuses_without_cookie", "check/handshake"} {
		if c, _ := rep.Case(name); c.Outcome != Fail {
			t.Errorf("%s on a non-plugin: %+v", name, c)
		}
	}
}

// TestCheckBinaryCatches: the quick check configures and calls, so it
// catches what the handshake alone does not; each defect fails exactly
// its case.
func TestCheckBinaryCatches(t *testing.T) {
	for _, d := range []struct{ kind, defect, failCase, message string }{
		{"check", "correct", "", ""},
		{"action", "correct", "", ""}, // needs a config without defaults: skipped
		{"check", "noisy-stdout", "check/configure_and_call", "plugin wrote to stdout while serving"},
		{"check", "schema-invalid", "check/config_schema", "is not a valid JSON Schema"},
		{"check", "unconfigurable", "check/configure_and_call", "cannot be configured with its config schema's defaults"},
	} {
		t.Run(d.kind+"/"+d.defect, func(t *testing.T) {
			rep := CheckBinary(t.Context(), install(t, d.kind, d.defect))
			wantOnlyFailure(t, rep, d.failCase, d.message)
		})
	}
}
