package launch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/configs"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/store"
)

// Dev runs root, one cluster and an agent for this machine in one process,
// every store embedded under the data directory. On a fresh data directory
// the example checks are applied, so a newcomer sees live results at once.
func Dev(ctx context.Context, c *config.Config, log *slog.Logger) error {
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
	// Root and cluster share one database: root keeps only the cluster list.
	st, err := OpenStore(ctx, c.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := applyExamples(ctx, st, c.Cluster.Name, log); err != nil {
		return err
	}
	a, err := newAgent(c, log)
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
	start("root", func(ctx context.Context) error { return serveRoot(ctx, c, st, log) })
	start("cluster", func(ctx context.Context) error { return runCluster(ctx, c, clusterListen, st, log) })
	start("agent", a.Run)
	log.Info("unyo dev is running", "server", rootURL, "cluster", c.Cluster.Name, "node", c.Agent.NodeName, "data_dir", c.DataDir)
	wg.Wait()
	close(errs)
	return <-errs
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
	var objs []*unyov1.Object
	for file, data := range map[string][]byte{"configs/resources/checks.yaml": configs.ExampleChecks, "configs/resources/rules.yaml": configs.DefaultRules} {
		o, err := manifest.Decode(bytes.NewReader(data), file)
		if err != nil {
			return fmt.Errorf("the built-in examples: %w", err)
		}
		objs = append(objs, o...)
	}
	reg := builtin.Kinds()
	if err := reg.Validate(objs, time.Now()); err != nil {
		return fmt.Errorf("the built-in examples: %w", err)
	}
	for _, o := range objs {
		kinds.SetCluster(o, clusterName)
	}
	reg.Prepare(objs)
	if _, err := st.PutObjects(ctx, objs); err != nil {
		return fmt.Errorf("apply the built-in examples: %w", err)
	}
	log.Info("applied the example checks and default rules", "objects", len(objs), "from", "configs/resources")
	return nil
}
