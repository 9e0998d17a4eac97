package launch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/unyo-ops/unyo/configs"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/objects"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/inventory/layout"
)

// DevOptions are what `unyo dev` does besides running its servers.
type DevOptions struct {
	// Inventory is a file of inventory objects applied at root on every
	// start (unchanged objects are left alone); ExampleInventory applies
	// configs/examples/inventory.yaml instead.
	Inventory        string
	ExampleInventory bool
}

// applyDevInventory applies the inventory DevOptions name to root's store
// the way `unyo apply -f` would (validated, references and rules checked,
// all or nothing), and returns the name of the PhysicalResource labelled
// unyo.dev/dev-node: "true", the server this machine's node stands for
// ("" if none).
func applyDevInventory(ctx context.Context, o DevOptions, rootStore store.Store, log *slog.Logger) (string, error) {
	var data []byte
	source := o.Inventory
	switch {
	case o.Inventory != "":
		b, err := os.ReadFile(o.Inventory)
		if err != nil {
			return "", fmt.Errorf("--inventory: %w", err)
		}
		data = b
	case o.ExampleInventory:
		data, source = configs.ExampleInventory, "configs/examples/inventory.yaml"
	default:
		return "", nil
	}
	objs, err := manifest.Decode(bytes.NewReader(data), source)
	if err != nil {
		return "", fmt.Errorf("the inventory %s: %w", source, err)
	}
	reg := builtin.Kinds()
	if err := reg.Validate(objs, time.Now()); err != nil {
		return "", fmt.Errorf("the inventory %s: %w", source, err)
	}
	for i, obj := range objs {
		if k, _, _ := reg.Of(obj); k.Owner != kinds.RootTier {
			return "", fmt.Errorf("the inventory %s: objects[%d] is a %s, which root does not keep; apply it with unyo apply -f", source, i, k.Name)
		}
	}
	local := &objects.Local{Kinds: reg, Store: rootStore, Log: log, Tier: kinds.RootTier}
	results, err := local.Apply(ctx, objs)
	if err != nil {
		return "", fmt.Errorf("apply the inventory %s: %w", source, err)
	}
	changed := 0
	for _, r := range results {
		if r.GetAction() != string(store.Unchanged) {
			changed++
		}
	}
	node := DevNode(objs)
	log.Info("applied the inventory", "from", source, "objects", len(objs), "changed", changed, "dev_node", node)
	return node, nil
}

// DevNode returns the name of the first PhysicalResource labelled
// unyo.dev/dev-node: "true" among objs, or "".
func DevNode(objs []*unyov1.Object) string {
	for _, o := range objs {
		if p := o.GetPhysicalResource(); p != nil && p.GetLabels()[layout.DevNodeLabel] == "true" {
			return p.GetName()
		}
	}
	return ""
}
