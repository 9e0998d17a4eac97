// Package base is the go-plugin glue shared by the host and the SDK: the
// handshake, API version negotiation, and the GRPCPlugin implementations
// that register unyo's services on the plugin side and hand out typed
// clients on the host side. It holds no state of its own.
package base

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

const (
	// ProtocolVersion is go-plugin's transport version. It changes only if
	// the envelope changes; the meaning is versioned by APIVersion instead.
	ProtocolVersion = 1
	// MagicCookieKey and MagicCookieValue are not security: they only stop a
	// plugin binary started by hand from waiting for a handshake that never
	// comes (it prints a hint and exits instead).
	MagicCookieKey   = "UNYO_PLUGIN_MAGIC_COOKIE"
	MagicCookieValue = "a9c1f0e4-unyo-plugin-7d2b"

	// APIVersion1 is the version of proto/unyo/plugin/v1.
	APIVersion1 uint32 = 1

	// Plugin map names: one per service a plugin may serve.
	NamePlugin   = "plugin"
	NameCheck    = "check"
	NameAction   = "action"
	NameProvider = "provider"

	// EnvParentPID tells a plugin which process started it, so that it can
	// notice the parent's death even when it was started through a wrapper.
	EnvParentPID = "UNYO_PLUGIN_PARENT_PID"
)

// Handshake returns the handshake both sides must agree on. A function, not
// a variable, so nobody can change it for everyone.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// SupportedAPIVersions are the API versions this build speaks.
func SupportedAPIVersions() []uint32 { return []uint32{APIVersion1} }

// Negotiate returns the highest version in both lists, or an error naming
// both sides' versions so that an operator knows which side to upgrade.
func Negotiate(host, plugin []uint32) (uint32, error) {
	var best uint32
	for _, v := range host {
		if v > best && slices.Contains(plugin, v) {
			best = v
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("no common plugin API version: host supports %s, plugin supports %s",
			versionList(host), versionList(plugin))
	}
	return best, nil
}

func versionList(vs []uint32) string {
	if len(vs) == 0 {
		return "none"
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("v%d", v)
	}
	return strings.Join(parts, ", ")
}

// Servers are the service implementations a plugin offers; nil ones are not
// registered, so calling them answers UNIMPLEMENTED.
type Servers struct {
	Plugin   pluginv1.PluginServer
	Check    pluginv1.CheckServer
	Action   pluginv1.ActionServer
	Provider pluginv1.ProviderServer
}

// Register registers the non-nil servers on s. Used by ServerPluginSet and
// by in-process harnesses that serve without go-plugin.
func (sv Servers) Register(s *grpc.Server) {
	if sv.Plugin != nil {
		pluginv1.RegisterPluginServer(s, sv.Plugin)
	}
	if sv.Check != nil {
		pluginv1.RegisterCheckServer(s, sv.Check)
	}
	if sv.Action != nil {
		pluginv1.RegisterActionServer(s, sv.Action)
	}
	if sv.Provider != nil {
		pluginv1.RegisterProviderServer(s, sv.Provider)
	}
}

// ServerPluginSet is the plugin map a plugin binary serves. go-plugin calls
// GRPCServer once per entry, so each entry registers only its own service.
func ServerPluginSet(sv Servers) plugin.PluginSet {
	set := plugin.PluginSet{}
	if sv.Plugin != nil {
		set[NamePlugin] = &grpcPlugin{register: func(s *grpc.Server) { pluginv1.RegisterPluginServer(s, sv.Plugin) }}
	}
	if sv.Check != nil {
		set[NameCheck] = &grpcPlugin{register: func(s *grpc.Server) { pluginv1.RegisterCheckServer(s, sv.Check) }}
	}
	if sv.Action != nil {
		set[NameAction] = &grpcPlugin{register: func(s *grpc.Server) { pluginv1.RegisterActionServer(s, sv.Action) }}
	}
	if sv.Provider != nil {
		set[NameProvider] = &grpcPlugin{register: func(s *grpc.Server) { pluginv1.RegisterProviderServer(s, sv.Provider) }}
	}
	return set
}

// Conn is what the host gets by dispensing NamePlugin: typed clients for
// every service over the plugin's one connection, and Done, closed by
// go-plugin when the plugin process exits.
type Conn struct {
	Plugin   pluginv1.PluginClient
	Check    pluginv1.CheckClient
	Action   pluginv1.ActionClient
	Provider pluginv1.ProviderClient
	GRPC     *grpc.ClientConn
	Done     <-chan struct{}
}

// NewConn wraps an established connection; done may be nil.
func NewConn(c *grpc.ClientConn, done <-chan struct{}) *Conn {
	return &Conn{
		Plugin: pluginv1.NewPluginClient(c), Check: pluginv1.NewCheckClient(c),
		Action: pluginv1.NewActionClient(c), Provider: pluginv1.NewProviderClient(c),
		GRPC: c, Done: done,
	}
}

// ClientPluginSet is the plugin map the host dispenses from. Dispense
// (NamePlugin) returns *Conn; the kind names return pluginv1.CheckClient,
// ActionClient or ProviderClient. All share the plugin's one connection.
func ClientPluginSet() plugin.PluginSet {
	return plugin.PluginSet{
		NamePlugin:   &grpcPlugin{client: func(ctx context.Context, c *grpc.ClientConn) any { return NewConn(c, ctx.Done()) }},
		NameCheck:    &grpcPlugin{client: func(_ context.Context, c *grpc.ClientConn) any { return pluginv1.NewCheckClient(c) }},
		NameAction:   &grpcPlugin{client: func(_ context.Context, c *grpc.ClientConn) any { return pluginv1.NewActionClient(c) }},
		NameProvider: &grpcPlugin{client: func(_ context.Context, c *grpc.ClientConn) any { return pluginv1.NewProviderClient(c) }},
	}
}

// grpcPlugin is a go-plugin GRPCPlugin; one side of it is used per process.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	register func(*grpc.Server)
	client   func(context.Context, *grpc.ClientConn) any
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.register == nil {
		return fmt.Errorf("this plugin map entry is for the host side only")
	}
	p.register(s)
	return nil
}

// GRPCClient gets a ctx that go-plugin cancels when the process exits.
func (p *grpcPlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	if p.client == nil {
		return nil, fmt.Errorf("this plugin map entry is for the plugin side only")
	}
	return p.client(ctx, c), nil
}

// KindName is the file-name word of a kind: unyo-<kind>-<name>.
func KindName(k pluginv1.Kind) string {
	switch k {
	case pluginv1.Kind_KIND_CHECK:
		return "check"
	case pluginv1.Kind_KIND_ACTION:
		return "action"
	case pluginv1.Kind_KIND_PROVIDER:
		return "provider"
	}
	return "unknown"
}

// ParseKind is the inverse of KindName.
func ParseKind(s string) (pluginv1.Kind, bool) {
	switch s {
	case "check":
		return pluginv1.Kind_KIND_CHECK, true
	case "action":
		return pluginv1.Kind_KIND_ACTION, true
	case "provider":
		return pluginv1.Kind_KIND_PROVIDER, true
	}
	return pluginv1.Kind_KIND_UNSPECIFIED, false
}
