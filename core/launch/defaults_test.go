package launch

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// TestDefaultRulesOnce: a cluster whose store never held a rule gets the
// default rules, marked origin "defaults"; once any rule was stored, a
// start adds nothing, so a deleted default rule stays deleted.
func TestDefaultRulesOnce(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rules := func() []string {
		t.Helper()
		objs, err := st.ListObjects(ctx, "EventRule")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, fmt.Sprintf("%s:%s:%s", kinds.Name(o), kinds.Cluster(o), kinds.Origin(o)))
		}
		return out
	}
	if err := applyDefaultRules(ctx, st, "c1", discard); err != nil {
		t.Fatal(err)
	}
	want := []string{"critical-alerts:c1:defaults", "node-down:c1:defaults", "resolve-on-recovery:c1:defaults"}
	if got := rules(); !slices.Equal(got, want) {
		t.Fatalf("rules after the first start = %v, want %v", got, want)
	}
	if err := st.DeleteObject(ctx, "EventRule", "critical-alerts"); err != nil {
		t.Fatal(err)
	}
	if err := applyDefaultRules(ctx, st, "c1", discard); err != nil {
		t.Fatal(err)
	}
	if got := rules(); !slices.Equal(got, want[1:]) {
		t.Fatalf("rules after a restart = %v, want the deleted one to stay deleted: %v", got, want[1:])
	}
}
