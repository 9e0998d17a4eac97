// Package sdk is what a plugin author builds against. Implement Plugin plus
// one or more of CheckPlugin, ActionPlugin and ProviderPlugin, and call Serve
// from main:
//
//	func main() { sdk.Serve(&myCheck{}) }
//
// Serve takes care of the go-plugin handshake, logging relayed to the host
// (use Log(ctx) or Logger), API version negotiation, per-call timeouts,
// output bounds, action idempotency, provider create idempotency and
// per-resource serialization, graceful Shutdown, and exiting when the host
// dies. Running the binary as `unyo-check-x describe` prints its info as
// JSON and exits without a handshake.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/sdk/sdkconfig"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// Info describes a plugin.
type Info struct {
	// Name without the unyo-<kind>- prefix, e.g. "http".
	Name string
	// Semantic version, e.g. "1.0.0".
	Version     string
	Description string
	// APIVersions defaults to the versions this SDK speaks. Set it only to
	// test version negotiation.
	APIVersions []uint32
}

// Plugin is the part every plugin implements.
type Plugin interface {
	Info() Info
	// ConfigSchema is a JSON schema for Configure's config; "{}" for none.
	ConfigSchema() string
	// Configure validates and applies the plugin-wide config. Return a
	// *ConfigError to name the offending fields; a rejected config must
	// leave the previous one in force.
	Configure(ctx context.Context, config map[string]any) error
	// Probe says whether the plugin can work now.
	Probe(ctx context.Context) (ready bool, reason string)
}

// Closer is optional: Close runs once on Shutdown, SIGTERM or host death,
// after in-flight calls ended or were cancelled.
type Closer interface {
	Close(ctx context.Context) error
}

// Check statuses.
const (
	OK       = pluginv1.CheckStatus_CHECK_STATUS_OK
	Warning  = pluginv1.CheckStatus_CHECK_STATUS_WARNING
	Critical = pluginv1.CheckStatus_CHECK_STATUS_CRITICAL
	Unknown  = pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN
)

// CheckRequest is one check to run.
type CheckRequest struct {
	// Name is the Check's name, for logs.
	Name   string
	Target map[string]any
	// Timeout is the budget; the ctx passed with the request expires then.
	Timeout time.Duration
}

// CheckResult is what a check found. Output's first line is the summary;
// the SDK bounds it to MaxOutput bytes.
type CheckResult struct {
	Status  pluginv1.CheckStatus
	Output  string
	Metrics []Metric
}

// Metric is one Nagios-style perfdata item.
type Metric struct {
	Label      string
	Value      float64
	Unit       string
	Warn, Crit string
	Min, Max   *float64
}

// CheckPlugin runs checks. Report everything about the target in the result;
// return an error only when the request itself is unusable (*ConfigError:
// INVALID_ARGUMENT) or the check could not be carried out at all (any other
// error becomes an UNKNOWN result carrying its text).
type CheckPlugin interface {
	Plugin
	Check(ctx context.Context, req CheckRequest) (CheckResult, error)
}

// Action outcomes.
const (
	Succeeded = pluginv1.OutcomeStatus_OUTCOME_STATUS_SUCCEEDED
	Failed    = pluginv1.OutcomeStatus_OUTCOME_STATUS_FAILED
	Retryable = pluginv1.OutcomeStatus_OUTCOME_STATUS_RETRYABLE
	Skipped   = pluginv1.OutcomeStatus_OUTCOME_STATUS_SKIPPED
	Cancelled = pluginv1.OutcomeStatus_OUTCOME_STATUS_CANCELLED
	TimedOut  = pluginv1.OutcomeStatus_OUTCOME_STATUS_TIMED_OUT
)

// ActionRequest is one action to carry out.
type ActionRequest struct {
	Key     string
	DryRun  bool
	Params  map[string]any
	Payload []byte
	Timeout time.Duration
}

// Outcome is how an action ended.
type Outcome struct {
	Status     pluginv1.OutcomeStatus
	Message    string
	RetryAfter time.Duration
}

// ActionPlugin carries out actions. The SDK guarantees one call per
// idempotency key (while the key is remembered), cancels ctx on Cancel or
// timeout, and turns a ctx ended early into CANCELLED or TIMED_OUT.
// progress may be called any number of times before returning.
type ActionPlugin interface {
	Plugin
	Execute(ctx context.Context, req ActionRequest, progress func(msg string)) Outcome
}

// ConfigError reports config or request fields that are wrong; it becomes
// INVALID_ARGUMENT with a google.rpc.BadRequest detail.
type ConfigError = sdkconfig.ConfigError

// Violation is one wrong field.
type Violation = sdkconfig.Violation

// Invalid returns a *ConfigError for one field.
func Invalid(field, format string, args ...any) error {
	return sdkconfig.Invalid(field, format, args...)
}

// Errors a provider returns; the SDK maps them to gRPC codes.
var (
	ErrNotFound      = errors.New("resource not found")
	ErrAlreadyExists = errors.New("resource already exists with another config")
	// ErrBadHandle: the handle's version or driver cannot be read.
	ErrBadHandle = errors.New("handle cannot be read by this plugin")
)

// Kinds returns the kinds p implements.
func Kinds(p Plugin) []pluginv1.Kind {
	var ks []pluginv1.Kind
	if _, ok := p.(CheckPlugin); ok {
		ks = append(ks, pluginv1.Kind_KIND_CHECK)
	}
	if _, ok := p.(ActionPlugin); ok {
		ks = append(ks, pluginv1.Kind_KIND_ACTION)
	}
	if _, ok := p.(ProviderPlugin); ok {
		ks = append(ks, pluginv1.Kind_KIND_PROVIDER)
	}
	return ks
}

// Description is what `describe` prints.
type Description struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Description  string   `json:"description,omitempty"`
	Kinds        []string `json:"kinds"`
	APIVersions  []uint32 `json:"api_versions"`
	ConfigSchema any      `json:"config_schema"`
}

// Describe builds the describe output for p.
func Describe(p Plugin) ([]byte, error) {
	info := infoOf(p)
	d := Description{Name: info.Name, Version: info.Version, Description: info.Description, APIVersions: info.APIVersions}
	for _, k := range Kinds(p) {
		d.Kinds = append(d.Kinds, base.KindName(k))
	}
	if err := json.Unmarshal([]byte(p.ConfigSchema()), &d.ConfigSchema); err != nil {
		return nil, fmt.Errorf("plugin %s: config schema is not JSON: %w", info.Name, err)
	}
	return json.MarshalIndent(d, "", "  ")
}

func infoOf(p Plugin) Info {
	info := p.Info()
	if len(info.APIVersions) == 0 {
		info.APIVersions = base.SupportedAPIVersions()
	}
	info.APIVersions = slices.Clone(info.APIVersions)
	return info
}

type logKey struct{}

// Log returns the logger for a call: relayed to the host, named after the
// plugin and annotated with the call. Outside a call it returns a logger
// that writes to stderr, which the host relays too.
func Log(ctx context.Context) hclog.Logger {
	if l, ok := ctx.Value(logKey{}).(hclog.Logger); ok {
		return l
	}
	return hclog.New(&hclog.LoggerOptions{JSONFormat: true, Level: hclog.Trace})
}

func withLog(ctx context.Context, l hclog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, l)
}

// cloneMap guards the SDK's stored configs against authors mutating theirs.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return maps.Clone(m)
}
