package launch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/configs"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/launch/agentrole"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/plugins/host"
)

// Dev runs root, one cluster and an agent for this machine in one process,
// every store embedded under the data directory. On a fresh data directory
// the example checks are applied, so a newcomer sees live results at once.
func Dev(ctx context.Context, c *config.Config, log *slog.Logger) error {
	return DevWith(ctx, c, log, DevOptions{})
}

// DevWith is Dev applying an inventory at root first (DevOptions).
func DevWith(ctx context.Context, c *config.Config, log *slog.Logger, o DevOptions) error {
	clusterListen, err := nextPort(c.Server.Listen, 1)
	if err != nil {
		return err
	}
	rootURL := "http://" + c.Server.Listen
	c.Cluster.RootURL = rootURL
	c.Cluster.AdvertiseURL = "http://" + clusterListen
	c.Agent.ClusterURL = "http://" + clusterListen
	if c.Agent.StatusListen != "" {
		if c.Agent.StatusListen, err = nextPort(c.Server.Listen, 2); err != nil {
			return err
		}
	}
	// Dev's tokens are the operator's: the cluster registers with one (and
	// then root calls it with the credential it got back); the agent enrols
	// with a join token when there is one, and then uses its node's own
	// credential.
	if len(c.Server.AdminTokens) > 0 {
		c.Cluster.RootToken = c.Server.AdminTokens[0]
		c.Agent.Token = c.Server.AdminTokens[0]
		// The operator's token also opens the agent's full /status.
		if c.Agent.StatusToken == "" {
			c.Agent.StatusToken = c.Server.AdminTokens[0]
		}
	}
	if len(c.Server.JoinTokens) > 0 {
		c.Agent.Token = c.Server.JoinTokens[0]
	}

	if err := preflight(c, log); err != nil {
		return err
	}
	st, err := OpenStore(ctx, c.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	// Root has a database of its own, as in a real deployment: the objects
	// it keeps for every cluster would otherwise share the cluster's rows.
	rootStore, err := OpenStore(ctx, config.Store{Driver: "sqlite", DSN: filepath.Join(c.DataDir, "root.db")})
	if err != nil {
		return fmt.Errorf("root's database: %w", err)
	}
	defer rootStore.Close()
	// The inventory's server labelled unyo.dev/dev-node is the one this
	// machine stands for: the local agent reports it as its resource, so
	// the node gets that server's topology (unless agent.resource says
	// otherwise).
	devNode, err := applyDevInventory(ctx, o, rootStore, log)
	if err != nil {
		return err
	}
	if c.Agent.Resource == "" {
		c.Agent.Resource = devNode
	}
	if err := applyExamples(ctx, st, c.Cluster.Name, log); err != nil {
		return err
	}
	devProvider(c, log)
	a, err := agentrole.New(c, log)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	start := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	start("root", func(ctx context.Context) error { return serveRoot(ctx, c, rootStore, log) })
	start("cluster", func(ctx context.Context) error { return runCluster(ctx, c, clusterListen, st, log) })
	start("agent", a.Run)
	log.Info("unyo dev is running", "server", rootURL, "cluster", c.Cluster.Name, "node", c.Agent.NodeName, "data_dir", c.DataDir)
	wg.Wait()
	close(errs)
	return <-errs
}

// devProvider enables the bundled provider-exec for dev's agent when it
// sits beside the unyo binary (`make build` puts it there) and the
// configuration enables no provider, so that the example RegionService
// (configs/examples/service.yaml) runs on this machine.
func devProvider(c *config.Config, log *slog.Logger) {
	for _, p := range c.Agent.Plugins.Enabled {
		if p.Kind == "provider" {
			return
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	dir := filepath.Dir(exe)
	bin := filepath.Join(dir, "unyo-provider-exec")
	sum, err := fileSHA256(bin)
	if err != nil {
		log.Info("no provider plugin beside unyo: RegionServices are placed but their replicas do not run (make build builds it)", "looked_for", bin)
		return
	}
	// The plugin wants an absolute state_dir; dev's data_dir is relative
	// to where unyo was started.
	state, err := filepath.Abs(filepath.Join(c.DataDir, "provider-exec"))
	if err != nil {
		log.Info("the bundled provider-exec is not enabled: its state directory has no absolute path", "err", err)
		return
	}
	c.Agent.Plugins.Dirs = append(c.Agent.Plugins.Dirs, dir)
	c.Agent.Plugins.Enabled = append(c.Agent.Plugins.Enabled, config.Plugin{
		Kind: "provider", Name: "exec", SHA256: sum,
		Config: map[string]any{"state_dir": state},
	})
	log.Info("the local agent runs RegionService replicas with the bundled provider-exec", "plugin", bin)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return host.SHA256(f)
}

// applyExamples stores the example checks and default rules in a cluster
// that has never had any, so deleting one later is not undone by a restart.
func applyExamples(ctx context.Context, st store.Store, clusterName string, log *slog.Logger) error {
	if rev, err := st.ChecksRevision(ctx); err != nil || rev != 0 {
		return err
	}
	if rev, err := st.RulesRevision(ctx); err != nil || rev != 0 {
		return err
	}
	checks, err := builtinObjects("configs/resources/checks.yaml", configs.ExampleChecks, clusterName, "")
	if err != nil {
		return err
	}
	rules, err := builtinObjects("configs/resources/rules.yaml", configs.DefaultRules, clusterName, kinds.OriginDefaults)
	if err != nil {
		return err
	}
	objs := append(checks, rules...)
	if _, err := st.PutObjects(ctx, objs); err != nil {
		return fmt.Errorf("apply the built-in examples: %w", err)
	}
	log.Info("applied the example checks and default rules", "objects", len(objs), "from", "configs/resources")
	return nil
}

// applyDefaultRules stores the default rules (cluster.default_rules) in a
// cluster whose store has never held an event rule, marked origin
// "defaults": root's rules of the same names replace them. Once any rule
// was stored, nothing is applied, so a default rule deleted later stays
// deleted; replicas starting together store the same objects, and the
// second finds them unchanged.
func applyDefaultRules(ctx context.Context, st store.Store, clusterName string, log *slog.Logger) error {
	if rev, err := st.RulesRevision(ctx); err != nil || rev != 0 {
		return err
	}
	objs, err := builtinObjects("configs/resources/rules.yaml", configs.DefaultRules, clusterName, kinds.OriginDefaults)
	if err != nil {
		return err
	}
	if _, err := st.PutObjects(ctx, objs); err != nil {
		return fmt.Errorf("apply the default rules (cluster.default_rules): %w", err)
	}
	log.Info("applied the default rules to a cluster that had none; set cluster.default_rules: false to start without them", "rules", len(objs), "from", "configs/resources/rules.yaml")
	return nil
}

// builtinObjects decodes and validates objects built into the binary,
// readied for this cluster's store.
func builtinObjects(file string, data []byte, clusterName, origin string) ([]*unyov1.Object, error) {
	objs, err := manifest.Decode(bytes.NewReader(data), file)
	if err != nil {
		return nil, fmt.Errorf("the built-in %s: %w", file, err)
	}
	reg := builtin.Kinds()
	if err := reg.Validate(objs, time.Now()); err != nil {
		return nil, fmt.Errorf("the built-in %s: %w", file, err)
	}
	for _, o := range objs {
		kinds.SetCluster(o, clusterName)
		kinds.SetOrigin(o, origin)
	}
	reg.Prepare(objs)
	return objs, nil
}
