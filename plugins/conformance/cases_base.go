package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	// growthCalls is how many calls the growth case makes.
	growthCalls = 1000
	// longRunCalls is how many calls the long-run case makes of one
	// instance, more than any other case.
	longRunCalls = 2000
	// maxFDGrowth and maxRSSGrowth allow for lazily opened descriptors and
	// a runtime that has not returned memory yet, not for a leak per call.
	maxFDGrowth  = 4
	maxRSSGrowth = 32 << 20
	// maxGoroutineGrowth allows for pools, not for a goroutine per call:
	// 1,000 leaked goroutines cost only about 2 MiB of memory.
	maxGoroutineGrowth = 20
	// offPathCalls is how often the growth case repeats each timeout and
	// cancellation path.
	offPathCalls = 25
)

var semver = regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func baseCases() []testCase {
	return []testCase{
		{name: "base/handshake", run: caseHandshake},
		{name: "base/version_negotiation", run: caseVersionNegotiation},
		{name: "base/info", run: caseInfo},
		{name: "base/config_schema", run: caseConfigSchema},
		{name: "base/api_versions_served", run: caseAPIVersionsServed},
		{name: "base/describe", run: caseDescribe},
		{name: "base/configure_valid", run: caseConfigureValid},
		{name: "base/configure_invalid", run: caseConfigureInvalid},
		{name: "base/not_configured", run: caseNotConfigured},
		{name: "base/unserved_kinds_unimplemented", run: caseUnservedKinds},
		{name: "base/probe", run: caseProbe},
		{name: "base/deadline_honoured", run: caseDeadline},
		{name: "base/shutdown", run: caseShutdown},
		{name: "base/exit_on_parent_death", run: caseParentDeath},
		{name: "base/exit_on_sigterm", run: caseSIGTERM},
		{name: "base/no_fd_or_memory_growth", run: caseGrowth},
		{name: "base/long_run", run: caseLongRun},
		{name: "base/quiet_stdout", run: caseQuietStdout},
	}
}

func caseHandshake(c *C) {
	inst := c.start(false)
	if inst.took > 5*time.Second {
		c.Errorf("handshake took %s, want under 5s", inst.took.Round(time.Millisecond))
	}
	ctx, cancel := c.timeout(2 * time.Second)
	defer cancel()
	if _, err := inst.conn.Plugin.Info(ctx, &pluginv1.InfoRequest{HostApiVersions: base.SupportedAPIVersions()}); err != nil {
		c.Errorf("Info right after the handshake: %v", err)
	}
}

func caseVersionNegotiation(c *C) {
	inst := c.start(false)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	for _, host := range [][]uint32{{1}, {1, 99}, {99, 1}, {99}, nil} {
		info, err := inst.conn.Plugin.Info(ctx, &pluginv1.InfoRequest{HostApiVersions: host})
		if err != nil {
			c.Fatalf("Info with host versions %v: %v", host, err)
		}
		want, _ := base.Negotiate(host, info.GetApiVersions())
		if info.GetSelectedApiVersion() != want {
			c.Errorf("host versions %v, plugin versions %v: plugin selected v%d, want v%d",
				host, info.GetApiVersions(), info.GetSelectedApiVersion(), want)
		}
	}
	info, _ := inst.conn.Plugin.Info(ctx, &pluginv1.InfoRequest{HostApiVersions: base.SupportedAPIVersions()})
	if !slices.Contains(info.GetApiVersions(), base.APIVersion1) {
		c.Errorf("plugin speaks %v, not v1", info.GetApiVersions())
	}
	cfg := c.mustStruct(c.fx.Config)
	_, err := inst.conn.Plugin.Configure(ctx, &pluginv1.ConfigureRequest{Config: cfg, ApiVersion: 99})
	if status.Code(err) != codes.FailedPrecondition {
		c.Errorf("Configure with API v99: got %v, want FAILED_PRECONDITION", err)
	}
}

func caseInfo(c *C) {
	inst := c.start(false)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	info, err := inst.conn.Plugin.Info(ctx, &pluginv1.InfoRequest{HostApiVersions: base.SupportedAPIVersions()})
	if err != nil {
		c.Fatalf("Info: %v", err)
	}
	if info.GetName() == "" || strings.ContainsAny(info.GetName(), "/ \t") {
		c.Errorf("name %q must be non-empty without slashes or spaces", info.GetName())
	}
	if !semver.MatchString(info.GetVersion()) {
		c.Errorf("version %q is not a semantic version", info.GetVersion())
	}
	if len(info.GetKinds()) == 0 {
		c.Errorf("no kinds advertised")
	}
	for _, k := range info.GetKinds() {
		if k == pluginv1.Kind_KIND_UNSPECIFIED {
			c.Errorf("kinds %v contain UNSPECIFIED", info.GetKinds())
		}
	}
	if c.target.isBinary() {
		if kind, name, ok := splitBinaryName(c.target.path); ok {
			if name != info.GetName() {
				c.Errorf("binary is named for plugin %q but Info says %q", name, info.GetName())
			}
			if !slices.Contains(info.GetKinds(), kind) {
				c.Errorf("binary is named as a %s plugin but Info advertises %v", base.KindName(kind), info.GetKinds())
			}
		}
	}
}

// caseConfigSchema: the config schema is a JSON Schema (checked against
// the meta-schema), and the fixture configs are valid by it.
func caseConfigSchema(c *C) {
	inst := c.start(false)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	sc, err := inst.conn.Plugin.ConfigSchema(ctx, &pluginv1.ConfigSchemaRequest{})
	if err != nil {
		c.Fatalf("ConfigSchema: %v", err)
	}
	schema, err := sdk.CompileSchema(sc.GetJsonSchema())
	if err != nil {
		c.Fatalf("config schema %s is not a valid JSON Schema: %v", truncate(sc.GetJsonSchema(), 200), err)
	}
	if c.fx.Config != nil {
		if err := sdk.ValidateSchema(schema, c.fx.Config); err != nil {
			c.Errorf("the fixture config is not valid by the plugin's own config schema: %v", err)
		}
	}
}

// caseAPIVersionsServed: every API version the plugin advertises is
// served: a host speaking v2 would pick v2 and call unyo.plugin.v2.
func caseAPIVersionsServed(c *C) {
	inst := c.start(false)
	if inst.raw == nil {
		c.Skipf("no raw connection to the plugin")
	}
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	for _, v := range c.info.GetApiVersions() {
		method := fmt.Sprintf("/unyo.plugin.v%d.Plugin/Info", v)
		// The reply is not read: whether the service exists is the question.
		err := inst.raw.Invoke(ctx, method, &pluginv1.InfoRequest{HostApiVersions: []uint32{v}}, &emptypb.Empty{})
		if status.Code(err) == codes.Unimplemented {
			c.Errorf("plugin advertises API v%d but does not serve unyo.plugin.v%d.Plugin (a host speaking v%d would pick it and fail): %v", v, v, v, err)
		} else if err != nil {
			c.Errorf("Info of API v%d: %v", v, err)
		}
	}
}

// caseSIGTERM: the plugin exits on SIGTERM, which the host sends when it
// stops a plugin that did not answer Shutdown, and Pdeathsig sends when
// the host dies.
func caseSIGTERM(c *C) {
	c.needBinary("it signals the plugin process")
	inst := c.start(true)
	if err := inst.signal(syscall.SIGTERM); err != nil {
		c.Fatalf("cannot signal the plugin: %v", err)
	}
	const wait = 5 * time.Second
	if !waitPIDGone(inst.pid, wait) {
		c.Errorf("plugin (pid %d) still runs %s after SIGTERM; it ignores or traps SIGTERM", inst.pid, wait)
	}
}

// caseLongRun: the plugin keeps answering over a few thousand calls, more
// than any other case makes of one instance.
func caseLongRun(c *C) {
	inst := c.start(true)
	call := c.cheapCall(inst)
	ctx, cancel := c.timeout(60 * time.Second)
	defer cancel()
	for i := range longRunCalls {
		if err := call(ctx); err != nil {
			c.Fatalf("call %d of %d: %v", i+1, longRunCalls, err)
		}
	}
	if _, err := inst.conn.Plugin.Probe(ctx, &pluginv1.ProbeRequest{}); err != nil {
		c.Errorf("Probe after %d calls: %v", longRunCalls, err)
	}
}

// splitBinaryName parses unyo-<kind>-<name>.
func splitBinaryName(path string) (pluginv1.Kind, string, bool) {
	rest, ok := strings.CutPrefix(filepath.Base(path), "unyo-")
	if !ok {
		return 0, "", false
	}
	k, name, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, "", false
	}
	kind, ok := base.ParseKind(k)
	return kind, name, ok && name != ""
}

// describeOutput is what `BINARY describe` prints.
type describeOutput struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Kinds       []string `json:"kinds"`
	APIVersions []uint32 `json:"api_versions"`
}

func runDescribe(ctx context.Context, path string) (describeOutput, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "describe")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var d describeOutput
	if err != nil {
		return d, string(out), err
	}
	err = json.Unmarshal(out, &d)
	return d, string(out), err
}

func caseDescribe(c *C) {
	c.needBinary("it runs the binary with the describe argument")
	d, raw, err := runDescribe(c.ctx, c.target.path)
	if err != nil {
		c.Fatalf("%s describe: %v (output %q)", filepath.Base(c.target.path), err, raw)
	}
	if d.Name != c.info.GetName() || d.Version != c.info.GetVersion() {
		c.Errorf("describe says %s %s, Info says %s %s", d.Name, d.Version, c.info.GetName(), c.info.GetVersion())
	}
	var kinds []string
	for _, k := range c.info.GetKinds() {
		kinds = append(kinds, base.KindName(k))
	}
	if !slices.Equal(d.Kinds, kinds) {
		c.Errorf("describe kinds %v, Info kinds %v", d.Kinds, kinds)
	}
}

func caseConfigureValid(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	// Configure may be called again with the same config.
	if err := inst.configure(ctx, c.fx.Config); err != nil {
		c.Errorf("reconfigure: %v", err)
	}
}

func caseConfigureInvalid(c *C) {
	if c.fx.InvalidConfig == nil {
		c.needFixture("invalid_config")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	_, err := inst.conn.Plugin.Configure(ctx, &pluginv1.ConfigureRequest{Config: c.mustStruct(c.fx.InvalidConfig), ApiVersion: base.APIVersion1})
	if status.Code(err) != codes.InvalidArgument {
		c.Errorf("invalid config: got %v, want INVALID_ARGUMENT", err)
	}
	// A rejected config leaves the previous one in force.
	p, err := inst.conn.Plugin.Probe(ctx, &pluginv1.ProbeRequest{})
	if err != nil || !p.GetReady() {
		c.Errorf("after a rejected config the plugin is not ready: %v %v", p, err)
	}
}

// kindCall makes a cheap call to the kind's service and returns its error.
func kindCall(ctx context.Context, conn *base.Conn, k pluginv1.Kind) error {
	switch k {
	case pluginv1.Kind_KIND_CHECK:
		_, err := conn.Check.Run(ctx, &pluginv1.RunRequest{Timeout: durationpb.New(time.Second)})
		return err
	case pluginv1.Kind_KIND_ACTION:
		st, err := conn.Action.Execute(ctx, &pluginv1.ExecuteRequest{IdempotencyKey: "conformance-probe", DryRun: true})
		if err != nil {
			return err
		}
		for {
			if _, err := st.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	case pluginv1.Kind_KIND_PROVIDER:
		_, err := conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: "conformance-no-such-resource"})
		return err
	}
	return nil
}

var allKinds = []pluginv1.Kind{pluginv1.Kind_KIND_CHECK, pluginv1.Kind_KIND_ACTION, pluginv1.Kind_KIND_PROVIDER}

func caseNotConfigured(c *C) {
	inst := c.start(false)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	p, err := inst.conn.Plugin.Probe(ctx, &pluginv1.ProbeRequest{})
	if err != nil || p.GetReady() {
		c.Errorf("Probe before Configure: got %v %v, want not ready", p, err)
	}
	for _, k := range c.info.GetKinds() {
		if err := kindCall(ctx, inst.conn, k); status.Code(err) != codes.FailedPrecondition {
			c.Errorf("%s call before Configure: got %v, want FAILED_PRECONDITION", base.KindName(k), err)
		}
	}
}

func caseUnservedKinds(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	for _, k := range allKinds {
		if slices.Contains(c.info.GetKinds(), k) {
			continue
		}
		if err := kindCall(ctx, inst.conn, k); status.Code(err) != codes.Unimplemented {
			c.Errorf("%s call to a plugin that does not serve it: got %v, want UNIMPLEMENTED", base.KindName(k), err)
		}
	}
}

func caseProbe(c *C) {
	inst := c.start(true)
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	p, err := inst.conn.Plugin.Probe(ctx, &pluginv1.ProbeRequest{})
	if err != nil || !p.GetReady() {
		c.Errorf("Probe after Configure: %v %v, want ready", p, err)
	}
}

// caseDeadline: a call whose gRPC deadline passes ends then, even when the
// work (a slow check or action) would take longer.
func caseDeadline(c *C) {
	const deadline = 300 * time.Millisecond
	var call func(ctx context.Context, inst *instance) error
	switch {
	case c.serves(pluginv1.Kind_KIND_CHECK) && c.fx.Check.Slow != nil:
		target := c.mustStruct(c.fx.Check.Slow)
		call = func(ctx context.Context, inst *instance) error {
			_, err := inst.conn.Check.Run(ctx, &pluginv1.RunRequest{Target: target, Timeout: durationpb.New(30 * time.Second)})
			return err
		}
	case c.serves(pluginv1.Kind_KIND_ACTION) && c.fx.Action.Slow != nil:
		params := c.mustStruct(c.fx.Action.Slow)
		call = func(ctx context.Context, inst *instance) error {
			st, err := inst.conn.Action.Execute(ctx, &pluginv1.ExecuteRequest{IdempotencyKey: "deadline", Params: params, Timeout: durationpb.New(30 * time.Second)})
			for err == nil {
				_, err = st.Recv()
			}
			return err
		}
	case c.serves(pluginv1.Kind_KIND_CHECK):
		c.needFixture("check.slow")
	case c.serves(pluginv1.Kind_KIND_ACTION):
		c.needFixture("action.slow")
	default:
		c.Skipf("needs a check or an action to slow down")
	}
	inst := c.start(true)
	ctx, cancel := c.timeout(deadline)
	defer cancel()
	began := time.Now()
	err := call(ctx, inst)
	took := time.Since(began)
	// An action's stream may end with its outcome right at the deadline,
	// which the plugin sees a moment before the harness: that is ending
	// in time too.
	if status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, io.EOF) {
		c.Errorf("call past its deadline: got %v, want DEADLINE_EXCEEDED", err)
	}
	if took > deadline+time.Second {
		c.Errorf("call with a %s deadline returned after %s", deadline, took.Round(time.Millisecond))
	}
	pctx, pcancel := c.timeout(5 * time.Second)
	defer pcancel()
	if _, err := inst.conn.Plugin.Probe(pctx, &pluginv1.ProbeRequest{}); err != nil {
		c.Errorf("plugin does not answer after a deadline passed: %v", err)
	}
}

func (c *C) serves(k pluginv1.Kind) bool { return slices.Contains(c.info.GetKinds(), k) }

func caseShutdown(c *C) {
	inst := c.start(true)
	const grace = 2 * time.Second
	began := time.Now()
	exited, err := inst.shutdown(grace, grace+3*time.Second)
	if err != nil {
		c.Fatalf("%v", err)
	}
	if !exited {
		c.Fatalf("plugin did not exit within %s of Shutdown (grace %s); it would need SIGKILL", grace+3*time.Second, grace)
	}
	c.log("exited %s after Shutdown", time.Since(began).Round(time.Millisecond))
}

func caseParentDeath(c *C) {
	c.needBinary("it kills the plugin's parent process")
	inst := c.startMode(true, startOrphanable)
	parent := inst.cmd.Process.Pid
	inst.stopping.Store(true)
	if err := syscall.Kill(parent, syscall.SIGKILL); err != nil {
		c.Fatalf("cannot kill the plugin's parent %d: %v", parent, err)
	}
	if !waitPIDGone(inst.pid, 5*time.Second) {
		c.Errorf("plugin (pid %d) still runs 5s after its parent died", inst.pid)
	}
}

func caseGrowth(c *C) {
	c.needBinary("it measures the plugin process's descriptors and memory")
	inst := c.start(true)
	call := c.cheapCall(inst)
	offPath := c.offPathCalls(inst)
	ctx, cancel := c.timeout(90 * time.Second)
	defer cancel()
	for range 50 { // warm up lazily opened descriptors and pools
		if err := call(ctx); err != nil {
			c.Fatalf("warm-up call: %v", err)
		}
	}
	for _, p := range offPath {
		_ = p.call(ctx)
	}
	fd0, err := openFDs(inst.pid)
	if err != nil {
		c.Skipf("%v", err)
	}
	rss0, _ := rssBytes(inst.pid)
	g0 := inst.goroutines(ctx)
	for i := range growthCalls {
		if err := call(ctx); err != nil {
			c.Fatalf("call %d of %d: %v", i+1, growthCalls, err)
		}
	}
	// Timeouts and cancellations are where cleanup is most often missed.
	var paths []string
	for _, p := range offPath {
		for range offPathCalls {
			if err := p.call(ctx); err != nil {
				c.Fatalf("%s call: %v", p.name, err)
			}
		}
		paths = append(paths, fmt.Sprintf("%d %s", offPathCalls, p.name))
	}
	// Descriptors and goroutines of finished work may end a moment later.
	var fd1 int
	var g1 int64
	deadline := time.Now().Add(2 * time.Second)
	for {
		fd1, _ = openFDs(inst.pid)
		g1 = inst.goroutines(ctx)
		if (fd1 <= fd0+maxFDGrowth && g1 <= g0+maxGoroutineGrowth) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rss1, _ := rssBytes(inst.pid)
	over := fmt.Sprintf("%d calls", growthCalls)
	if len(paths) > 0 {
		over += " and " + strings.Join(paths, " and ")
	}
	if fd1 > fd0+maxFDGrowth {
		c.Errorf("open descriptors grew from %d to %d over %s", fd0, fd1, over)
	}
	if rss1 > rss0+maxRSSGrowth {
		c.Errorf("resident memory grew from %d to %d KiB over %s", rss0>>10, rss1>>10, over)
	}
	if g0 > 0 && g1 > g0+maxGoroutineGrowth {
		c.Errorf("goroutines grew from %d to %d over %s (as the plugin reports them in Probe)", g0, g1, over)
	}
	c.log("fds %d -> %d, rss %d -> %d KiB, goroutines %d -> %d", fd0, fd1, rss0>>10, rss1>>10, g0, g1)
}

// goroutines is what the plugin reports in Probe; 0 when it does not.
func (i *instance) goroutines(ctx context.Context) int64 {
	p, err := i.conn.Plugin.Probe(ctx, &pluginv1.ProbeRequest{})
	if err != nil {
		return 0
	}
	return p.GetGoroutines()
}

// namedCall is a call the growth case repeats.
type namedCall struct {
	name string
	call func(context.Context) error
}

// offPathCalls are the kind's calls that end by timeout or cancellation;
// an error is returned only when the plugin answered wrongly.
func (c *C) offPathCalls(inst *instance) []namedCall {
	var out []namedCall
	switch {
	case c.serves(pluginv1.Kind_KIND_CHECK) && c.fx.Check.Slow != nil:
		slow := c.mustStruct(c.fx.Check.Slow)
		out = append(out,
			namedCall{"timed-out checks", func(ctx context.Context) error {
				_, err := inst.conn.Check.Run(ctx, &pluginv1.RunRequest{Target: slow, Timeout: durationpb.New(5 * time.Millisecond)})
				return err
			}},
			namedCall{"cancelled checks", func(ctx context.Context) error {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
				defer cancel()
				_, err := inst.conn.Check.Run(cctx, &pluginv1.RunRequest{Target: slow, Timeout: durationpb.New(10 * time.Second)})
				if code := status.Code(err); code == codes.DeadlineExceeded || code == codes.Canceled {
					return nil
				}
				return err
			}})
	case c.serves(pluginv1.Kind_KIND_ACTION) && c.fx.Action.Slow != nil:
		slow := c.mustStruct(c.fx.Action.Slow)
		n := 0
		out = append(out, namedCall{"timed-out actions", func(ctx context.Context) error {
			n++
			_, err := execute(ctx, inst.conn, &pluginv1.ExecuteRequest{IdempotencyKey: fmt.Sprintf("growth-timeout-%d", n), Params: slow, Timeout: durationpb.New(5 * time.Millisecond)})
			return err
		}})
	}
	return out
}

// cheapCall is the kind's everyday call, for the growth case.
func (c *C) cheapCall(inst *instance) func(context.Context) error {
	switch {
	case c.serves(pluginv1.Kind_KIND_CHECK) && len(c.fx.Check.Statuses) > 0:
		var target map[string]any
		for _, s := range []string{"ok", "warning", "critical", "unknown"} {
			if t, ok := c.fx.Check.Statuses[s]; ok {
				target = t
				break
			}
		}
		req := &pluginv1.RunRequest{Target: c.mustStruct(target), Timeout: durationpb.New(5 * time.Second)}
		return func(ctx context.Context) error { _, err := inst.conn.Check.Run(ctx, req); return err }
	case c.serves(pluginv1.Kind_KIND_ACTION):
		params := c.mustStruct(c.fx.Action.Params)
		return func(ctx context.Context) error {
			_, err := execute(ctx, inst.conn, &pluginv1.ExecuteRequest{IdempotencyKey: "growth", DryRun: true, Params: params})
			return err
		}
	case c.serves(pluginv1.Kind_KIND_PROVIDER):
		return func(ctx context.Context) error {
			_, err := inst.conn.Provider.Get(ctx, &pluginv1.GetRequest{Id: "conformance-no-such-resource"})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			return err
		}
	}
	return func(ctx context.Context) error {
		_, err := inst.conn.Plugin.Probe(ctx, &pluginv1.ProbeRequest{})
		return err
	}
}

func caseQuietStdout(c *C) {
	c.needBinary("it watches the plugin's stdout")
	inst := c.start(true)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	call := c.cheapCall(inst)
	for range 5 {
		_ = call(ctx)
	}
	// Stray output goes through go-plugin's stdio stream; give it a moment
	// to arrive before the plugin exits.
	_, _ = inst.shutdown(time.Second, 3*time.Second)
	if out := inst.stdout.String(); out != "" {
		c.Errorf("plugin wrote to stdout besides the handshake: %q", truncate(out, 200))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
