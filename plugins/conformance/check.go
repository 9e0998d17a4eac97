package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// CheckBinary makes the quick checks of `unyo plugin check`: the file's
// name and mode, `describe`, refusal to run without the handshake cookie,
// a handshake within the deadline, a config schema that is a JSON Schema,
// and a smoke test: configured with its schema's defaults, one call of
// each kind it serves, nothing else on stdout. It needs no fixtures.
func CheckBinary(ctx context.Context, path string) *Report {
	target := Binary(path, nil)
	rep := &Report{Target: target.String(), Started: time.Now()}
	cases := []testCase{
		{name: "check/name", run: func(c *C) {
			if _, _, ok := splitBinaryName(path); !ok {
				c.Errorf("%s is not named unyo-<check|action|provider>-<name>, so discovery will not find it", filepath.Base(path))
			}
		}},
		{name: "check/executable", run: func(c *C) {
			st, err := os.Stat(path)
			switch {
			case err != nil:
				c.Fatalf("%v", err)
			case !st.Mode().IsRegular():
				c.Errorf("%s is not a regular file", path)
			case st.Mode().Perm()&0o111 == 0:
				c.Errorf("%s is not executable (mode %s)", path, st.Mode().Perm())
			}
		}},
		{name: "check/describe", run: func(c *C) {
			d, raw, err := runDescribe(c.ctx, path)
			if err != nil {
				c.Fatalf("%s describe: %v (output %q)", filepath.Base(path), err, truncate(raw, 200))
			}
			if d.Name == "" || !semver.MatchString(d.Version) || len(d.Kinds) == 0 {
				c.Errorf("describe output lacks a name, a semantic version or kinds: %s", truncate(raw, 200))
			}
			if kind, name, ok := splitBinaryName(path); ok {
				if d.Name != name {
					c.Errorf("binary is named for plugin %q but describe says %q", name, d.Name)
				}
				if !strings.Contains(" "+strings.Join(d.Kinds, " ")+" ", " "+base.KindName(kind)+" ") {
					c.Errorf("binary is named as a %s plugin but describe lists %v", base.KindName(kind), d.Kinds)
				}
			}
			rep.Plugin, rep.Version, rep.Kinds = d.Name, d.Version, d.Kinds
		}},
		{name: "check/refuses_without_cookie", run: func(c *C) { caseNoCookie(c, path) }},
		{name: "check/handshake", run: func(c *C) {
			inst := c.start(false)
			ctx, cancel := c.timeout(5 * time.Second)
			defer cancel()
			if _, err := inst.conn.Plugin.Info(ctx, &pluginv1.InfoRequest{HostApiVersions: base.SupportedAPIVersions()}); err != nil {
				c.Errorf("Info after the handshake: %v", err)
			}
			c.log("handshake in %s", inst.took.Round(time.Millisecond))
			if ok, err := inst.shutdown(time.Second, 4*time.Second); err != nil || !ok {
				c.Errorf("plugin did not exit after Shutdown: %v", err)
			}
			if out := inst.stdout.String(); out != "" {
				c.Errorf("plugin wrote to stdout besides the handshake: %q", truncate(out, 200))
			}
		}},
		{name: "check/config_schema", run: caseConfigSchema},
		{name: "check/configure_and_call", run: caseConfigureAndCall},
	}
	// The schema and smoke cases need Info; without an answer they fail
	// naming why, like the handshake case.
	info, infoErr := probeInfo(ctx, target)
	for _, tc := range cases {
		if info == nil && (tc.name == "check/config_schema" || tc.name == "check/configure_and_call") {
			tc.run = func(c *C) { c.Fatalf("%v", infoErr) }
		}
		rep.add(runCase(ctx, tc, &C{name: tc.name, target: target, fx: &Fixtures{}, info: info}))
	}
	rep.Duration = time.Since(rep.Started)
	return rep
}

// caseNoCookie: started by hand, without the cookie, a plugin must say so
// and exit instead of waiting for a handshake, and print no handshake.
func caseNoCookie(c *C, path string) {
	ctx, cancel := c.timeout(5 * time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, base.MagicCookieKey+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		c.Errorf("without the handshake cookie the plugin did not exit within 5s")
	case err == nil:
		c.Errorf("without the handshake cookie the plugin exited 0; want a non-zero exit")
	case !errors.As(err, &ee):
		c.Errorf("cannot run %s: %v", path, err)
	}
	if stdout.Len() > 0 {
		c.Errorf("without the handshake cookie the plugin printed on stdout: %q", truncate(stdout.String(), 200))
	}
	if stderr.Len() == 0 {
		c.Errorf("without the handshake cookie the plugin exited silently; it should tell the operator why")
	}
}

// caseConfigureAndCall configures the plugin with its config schema's
// defaults and makes one call of each kind it serves: any answer of the
// protocol will do, a crash, a refusal to be configured or stray stdout
// will not.
func caseConfigureAndCall(c *C) {
	inst := c.start(false)
	ctx, cancel := c.timeout(10 * time.Second)
	defer cancel()
	sc, err := inst.conn.Plugin.ConfigSchema(ctx, &pluginv1.ConfigSchemaRequest{})
	if err != nil {
		c.Fatalf("ConfigSchema: %v", err)
	}
	cfg := schemaDefaults(sc.GetJsonSchema())
	if schema, err := sdk.CompileSchema(sc.GetJsonSchema()); err == nil {
		if err := sdk.ValidateSchema(schema, cfg); err != nil {
			// The plugin says itself that it needs settings nobody gave.
			c.Skipf("the schema's defaults %v are not a valid config by the schema (%v); run `unyo plugin conformance` with a config fixture", cfg, err)
		}
	}
	if err := inst.configure(ctx, cfg); err != nil {
		c.Fatalf("the plugin cannot be configured with its config schema's defaults %v, which its schema accepts: %v", cfg, err)
	}
	for _, k := range c.info.GetKinds() {
		switch err := kindCall(ctx, inst.conn, k); status.Code(err) {
		case codes.OK, codes.InvalidArgument, codes.NotFound:
			// Answered, as the protocol says: the call had no target.
		default:
			c.Errorf("one %s call after Configure: %v", base.KindName(k), err)
		}
	}
	if ok, err := inst.shutdown(time.Second, 4*time.Second); err != nil || !ok {
		c.Errorf("plugin did not exit after Shutdown: %v", err)
	}
	if out := inst.stdout.String(); out != "" {
		c.Errorf("plugin wrote to stdout while serving (stdout carries only the handshake): %q", truncate(out, 200))
	}
}

// schemaDefaults builds a config from the top-level properties' defaults
// of a JSON Schema.
func schemaDefaults(schema string) map[string]any {
	var s struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	cfg := map[string]any{}
	if json.Unmarshal([]byte(schema), &s) != nil {
		return cfg
	}
	for name, p := range s.Properties {
		if p.Default != nil {
			cfg[name] = p.Default
		}
	}
	return cfg
}
