// Package conformance checks that a unyo plugin keeps the protocol's
// promises: version negotiation, configuration, deadlines, shutdown, exit on
// parent death, no descriptor or memory growth, and per kind what the
// protocol says about checks, actions and providers.
//
// From a Go test:
//
//	conformance.Run(t, conformance.Binary(path, fixtures))
//
// runs every case as a subtest; Execute runs them and returns a Report (for
// the `unyo plugin conformance` command). Every case starts its own plugin
// instances and removes what it created, even when it fails.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// caseTimeout bounds one case; a case still running then is failed.
const caseTimeout = 2 * time.Minute

// Options tune a run.
type Options struct {
	// Run selects cases whose name matches (nil: all).
	Run *regexp.Regexp
	// OnCase is called after each case, for progress output.
	OnCase func(CaseResult)
}

// testCase is one conformance case. kind is "" for the base cases.
type testCase struct {
	name string
	kind pluginv1.Kind
	run  func(c *C)
}

// C is a running case: it records failures and cleanups, and starts plugin
// instances that it stops when the case ends.
type C struct {
	ctx    context.Context
	name   string
	target Target
	fx     *Fixtures
	env    *runEnv
	info   *pluginv1.InfoResponse

	mu       sync.Mutex
	failures []string
	notes    []string
	skip     string
	needs    string // the fixture whose absence skipped the case
	cleanups []func()
	started  []*instance
}

// Errorf records a failure and continues; safe from any goroutine.
func (c *C) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// Fatalf records a failure and ends the case; only from the case's own
// goroutine.
func (c *C) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	runtime.Goexit()
}

// Skipf ends the case as skipped.
func (c *C) Skipf(format string, args ...any) {
	c.mu.Lock()
	c.skip = fmt.Sprintf(format, args...)
	c.mu.Unlock()
	runtime.Goexit()
}

// needFixture skips the case for want of the named fixture, which the
// report then lists as one that would enable it.
func (c *C) needFixture(name string) {
	c.mu.Lock()
	c.needs = name
	c.mu.Unlock()
	c.Skipf("needs the %s fixture", name)
}

// log adds a note to the case's report.
func (c *C) log(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// reportCrashes fails the case for every instance that exited without
// the harness ending it, saying how, as the host would: a failed call's
// "connection reset by peer" alone does not say that the plugin panicked.
func (c *C) reportCrashes() {
	c.mu.Lock()
	started := slices.Clone(c.started)
	c.mu.Unlock()
	for _, inst := range started {
		if c.failed() && !inst.stopping.Load() {
			// A call failed: the exit it saw may be a moment from
			// being noticed.
			t := time.NewTimer(time.Second)
			select {
			case <-inst.exited():
			case <-t.C:
			}
			t.Stop()
		}
		if how := inst.crashed(); how != "" {
			c.Errorf("plugin %s exited during the case without being asked to (%s)", inst.name, how)
		}
	}
}

// Cleanup registers f to run when the case ends, last first.
func (c *C) Cleanup(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanups = append(c.cleanups, f)
}

func (c *C) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.failures) > 0
}

// needBinary skips cases that need a plugin process of their own.
func (c *C) needBinary(why string) {
	if !c.target.isBinary() {
		c.Skipf("needs a plugin binary: %s", why)
	}
}

// start starts an instance that is stopped when the case ends; configured
// with the fixture config unless told otherwise.
func (c *C) start(configure bool) *instance {
	return c.startMode(configure, startNormal)
}

func (c *C) startMode(configure bool, mode startMode) *instance {
	inst, err := c.target.start(c.ctx, mode)
	if err != nil {
		c.Fatalf("%v", err)
	}
	c.Cleanup(inst.close)
	c.mu.Lock()
	c.started = append(c.started, inst)
	c.mu.Unlock()
	if configure {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer cancel()
		if err := inst.configure(ctx, c.fx.Config); err != nil {
			if c.fx.Config == nil && status.Code(errors.Unwrap(err)) == codes.InvalidArgument {
				// Not the plugin's fault: it needs a config nobody gave.
				c.needFixture("config")
			}
			c.Fatalf("%v", err)
		}
	}
	return inst
}

// timeout is a context for one call.
func (c *C) timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, d)
}

// Outcome is how a case ended.
type Outcome string

const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
	Skip Outcome = "skip"
)

// CaseResult is one case's outcome.
type CaseResult struct {
	Name     string        `json:"name"`
	Outcome  Outcome       `json:"outcome"`
	Duration time.Duration `json:"duration_ns"`
	// Message is the failures (one per line) or why it was skipped.
	Message string `json:"message,omitempty"`
	// NeedsFixture is the fixture whose absence skipped the case.
	NeedsFixture string `json:"needs_fixture,omitempty"`
}

// Report is a whole run.
type Report struct {
	Target     string        `json:"target"`
	Plugin     string        `json:"plugin"`
	Version    string        `json:"version"`
	Kinds      []string      `json:"kinds"`
	Started    time.Time     `json:"started"`
	Duration   time.Duration `json:"duration_ns"`
	Cases      []CaseResult  `json:"cases"`
	Passed     int           `json:"passed"`
	Failed     int           `json:"failed"`
	Skipped    int           `json:"skipped"`
	SetupError string        `json:"setup_error,omitempty"`
}

// OK says whether no case failed and the run could start at all.
func (r *Report) OK() bool { return r.Failed == 0 && r.SetupError == "" }

// MissingFixtures maps each fixture whose absence skipped cases to those
// cases, so that an author knows what to add.
func (r *Report) MissingFixtures() map[string][]string {
	m := map[string][]string{}
	for _, c := range r.Cases {
		if c.Outcome == Skip && c.NeedsFixture != "" {
			m[c.NeedsFixture] = append(m[c.NeedsFixture], c.Name)
		}
	}
	return m
}

// Case returns the named case's result.
func (r *Report) Case(name string) (CaseResult, bool) {
	for _, c := range r.Cases {
		if c.Name == name {
			return c, true
		}
	}
	return CaseResult{}, false
}

func (r *Report) add(cr CaseResult) {
	r.Cases = append(r.Cases, cr)
	switch cr.Outcome {
	case Pass:
		r.Passed++
	case Fail:
		r.Failed++
	case Skip:
		r.Skipped++
	}
}

// Execute runs the conformance cases against target. The error is for a
// run that could not start (no plugin, no Info); failing cases are in the
// report.
func Execute(ctx context.Context, target Target, opts Options) (*Report, error) {
	return executeCases(ctx, target, opts, allCases())
}

func executeCases(ctx context.Context, target Target, opts Options, cases []testCase) (*Report, error) {
	rep := &Report{Target: target.String(), Started: time.Now()}
	defer func() { rep.Duration = time.Since(rep.Started) }()
	env, err := newRunEnv()
	if err != nil {
		rep.SetupError = err.Error()
		return rep, err
	}
	defer env.close()
	fx := target.fixtures.expand(env.vars)
	info, err := probeInfo(ctx, target)
	if err != nil {
		rep.SetupError = err.Error()
		return rep, err
	}
	rep.Plugin, rep.Version = info.GetName(), info.GetVersion()
	for _, k := range info.GetKinds() {
		rep.Kinds = append(rep.Kinds, base.KindName(k))
	}
	for _, tc := range cases {
		if opts.Run != nil && !opts.Run.MatchString(tc.name) {
			continue
		}
		// Cases of kinds the plugin does not serve are left out, not
		// skipped: they are not the plugin's business at all.
		if tc.kind != pluginv1.Kind_KIND_UNSPECIFIED && !slices.Contains(info.GetKinds(), tc.kind) {
			continue
		}
		cr := runCase(ctx, tc, &C{name: tc.name, target: target, fx: fx, env: env, info: info})
		rep.add(cr)
		if opts.OnCase != nil {
			opts.OnCase(cr)
		}
	}
	return rep, nil
}

// probeInfo asks a first instance what the plugin is, to pick the cases.
func probeInfo(ctx context.Context, target Target) (*pluginv1.InfoResponse, error) {
	inst, err := target.start(ctx, startNormal)
	if err != nil {
		return nil, err
	}
	defer inst.close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := inst.conn.Plugin.Info(cctx, &pluginv1.InfoRequest{HostApiVersions: base.SupportedAPIVersions()})
	if err != nil {
		return nil, fmt.Errorf("plugin %s did not answer Info: %w", target, err)
	}
	return info, nil
}

// runCase runs one case in its own goroutine (Fatalf and Skipf end it with
// runtime.Goexit), then its cleanups, whatever happened.
func runCase(ctx context.Context, tc testCase, c *C) CaseResult {
	cctx, cancel := context.WithTimeout(ctx, caseTimeout)
	defer cancel()
	c.ctx = cctx
	began := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				c.Errorf("harness panic: %v", r)
			}
		}()
		tc.run(c)
	}()
	select {
	case <-done:
	case <-cctx.Done():
		c.Errorf("case did not finish within %s", caseTimeout)
	}
	c.reportCrashes()
	c.mu.Lock()
	cleanups := slices.Clone(c.cleanups)
	c.cleanups = nil
	c.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cr := CaseResult{Name: tc.name, Duration: time.Since(began), Outcome: Pass}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case len(c.failures) > 0:
		cr.Outcome, cr.Message = Fail, strings.Join(c.failures, "\n")
	case c.skip != "":
		cr.Outcome, cr.Message, cr.NeedsFixture = Skip, c.skip, c.needs
	default:
		cr.Message = strings.Join(c.notes, "; ")
	}
	return cr
}

// Run runs the cases against target as subtests of t, named like the
// cases ("base/shutdown", "provider/recover_after_kill").
func Run(t *testing.T, target Target) {
	t.Helper()
	RunWith(t, target, Options{})
}

// RunWith is Run with options; it returns the report for further checks.
func RunWith(t *testing.T, target Target, opts Options) *Report {
	t.Helper()
	ctx := t.Context()
	rep, err := Execute(ctx, target, opts)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	for _, cr := range rep.Cases {
		t.Run(cr.Name, func(t *testing.T) {
			switch cr.Outcome {
			case Fail:
				t.Errorf("%s (%s)", cr.Message, cr.Duration.Round(time.Millisecond))
			case Skip:
				t.Skip(cr.Message)
			default:
				t.Logf("passed in %s %s", cr.Duration.Round(time.Millisecond), cr.Message)
			}
		})
	}
	return rep
}

func toStruct(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}, nil
	}
	return structpb.NewStruct(m)
}

// mustStruct converts a fixture map or ends the case.
func (c *C) mustStruct(m map[string]any) *structpb.Struct {
	s, err := toStruct(m)
	if err != nil {
		c.Fatalf("fixture cannot be sent: %v", err)
	}
	return s
}

// allCases lists every case in report order.
func allCases() []testCase {
	var cs []testCase
	cs = append(cs, baseCases()...)
	cs = append(cs, checkCases()...)
	cs = append(cs, actionCases()...)
	cs = append(cs, providerCases()...)
	return cs
}

// CaseNames lists every case name, for --run and documentation.
func CaseNames() []string {
	var out []string
	for _, c := range allCases() {
		out = append(out, c.name)
	}
	return out
}
