package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// leaseHolders returns which of the replicas say they hold the controller lease.
func leaseHolders(t *testing.T, urls map[string]string) ([]string, error) {
	var holders []string
	for name, url := range urls {
		out, err := cli(t, url, "--token", adminToken, "status", "-o", "json")
		if err != nil {
			continue // a killed replica does not answer
		}
		var st struct {
			Leases []string `json:"leases"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return nil, fmt.Errorf("status of %s: %w: %s", name, err, out)
		}
		if slices.Contains(st.Leases, "cluster-controller") {
			holders = append(holders, name)
		}
	}
	slices.Sort(holders)
	return holders, nil
}

func TestControllerLeaseFailover(t *testing.T) {
	f := newFleet(t, sharedStores)
	// A second replica of cluster c1 on the same database.
	addr := freeAddr(t)
	cfg := writeFile(t, f.dir, "cluster2.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/cluster2
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
store:
  driver: postgres
  dsn: %s
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
  replica: replica-2
  heartbeat_interval: 1s
  lease_ttl: 3s
%s`, f.dir, addr, adminToken, joinToken, f.pg.DSN(), sharedStores))
	second := startUnyo(t, "cluster2", nil, "server", "--config", cfg)
	urls := map[string]string{"first": f.clURL, "second": "http://" + addr}

	// Exactly one holds the lease, over many observations.
	var holder string
	for i := 0; i < 10; i++ {
		testutil.Eventually(t, 10*time.Second, "exactly one lease holder", func() error {
			h, err := leaseHolders(t, urls)
			if err != nil {
				return err
			}
			if len(h) != 1 {
				return fmt.Errorf("holders: %v", h)
			}
			if holder != "" && h[0] != holder {
				return fmt.Errorf("the lease moved from %s to %s with both replicas up", holder, h[0])
			}
			holder = h[0]
			return nil
		})
		time.Sleep(300 * time.Millisecond)
	}

	// Kill the holder: the other takes over within the lease time.
	victim, survivor := f.cluster, "second"
	if holder == "second" {
		victim, survivor = second, "first"
	}
	victim.kill()
	killed := time.Now()
	testutil.Eventually(t, 3*3*time.Second, "the surviving replica to take the lease", func() error {
		h, err := leaseHolders(t, urls)
		if err != nil {
			return err
		}
		if len(h) != 1 || h[0] != survivor {
			return fmt.Errorf("holders: %v", h)
		}
		return nil
	})
	t.Logf("%s took over %s after the holder was killed (lease ttl 3s)", survivor, time.Since(killed).Round(100*time.Millisecond))
}
