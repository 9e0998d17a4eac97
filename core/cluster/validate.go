package cluster

import (
	"fmt"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/provision/topology"
)

// maxPlugins bounds the plugin statuses one node reports.
const maxPlugins = 256

// validNode checks what an agent says about its node before it is stored.
func validNode(n *unyov1.Node) error {
	if err := validate.Name(n.GetName()); err != nil {
		return fmt.Errorf("node.name: %w", err)
	}
	if err := limits.Labels("node.labels", n.GetLabels()); err != nil {
		return err
	}
	for k := range n.GetLabels() {
		if topology.IsTopologyLabel(k) {
			return fmt.Errorf("node.labels: %q: labels under %s are root's, derived from its inventory; remove it from agent.labels (agent.resource names the node's PhysicalResource)", k, topology.Prefix)
		}
	}
	for _, f := range [...]struct{ field, v string }{{"node.agent_resource", n.GetAgentResource()}, {"node.hostname", n.GetHostname()}, {"node.serial", n.GetSerial()}} {
		if err := limits.Text(f.field, f.v, limits.MaxText); err != nil {
			return err
		}
	}
	if err := limits.Address("node.address", n.GetAddress()); err != nil {
		return err
	}
	for _, f := range [...]struct{ field, v string }{{"node.agent_version", n.GetAgentVersion()}, {"node.os", n.GetOs()}, {"node.kernel", n.GetKernel()}} {
		if err := limits.Text(f.field, f.v, limits.MaxText); err != nil {
			return err
		}
	}
	if err := validPlugins("node.plugins", n.GetPlugins()); err != nil {
		return err
	}
	return validProviders("node.providers", n.GetProviders())
}

// validProviders checks the provider statuses an agent reports: names,
// bounded texts and attributes, no negative capacity.
func validProviders(field string, ps []*unyov1.ProviderStatus) error {
	if len(ps) > maxPlugins {
		return fmt.Errorf("%s: %d provider statuses, at most %d are allowed", field, len(ps), maxPlugins)
	}
	for i, p := range ps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := validate.Name(p.GetName()); err != nil {
			return fmt.Errorf("%s.name: %w", f, err)
		}
		if err := limits.Text(f+".reason", p.GetReason(), limits.MaxText); err != nil {
			return err
		}
		if err := limits.Labels(f+".attributes", p.GetAttributes()); err != nil {
			return err
		}
		if c := p.GetCapacity(); c.GetCpus() < 0 || c.GetMemoryBytes() < 0 || c.GetDiskBytes() < 0 {
			return fmt.Errorf("%s.capacity: negative", f)
		}
	}
	return nil
}

func validPlugins(field string, ps []*unyov1.PluginStatus) error {
	if len(ps) > maxPlugins {
		return fmt.Errorf("%s: %d plugin statuses, at most %d are allowed", field, len(ps), maxPlugins)
	}
	for i, p := range ps {
		for _, f := range [...]struct{ name, v string }{{"kind", p.GetKind()}, {"name", p.GetName()}, {"version", p.GetVersion()}, {"state", p.GetState()}, {"last_error", p.GetLastError()}} {
			if len(f.v) > limits.MaxText {
				return limits.Text(fmt.Sprintf("%s[%d].%s", field, i, f.name), f.v, limits.MaxText)
			}
		}
	}
	return nil
}

// required refuses a request whose field is empty, naming the field.
func required(field, v string) error {
	if err := limits.Required(field, v); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return nil
}
