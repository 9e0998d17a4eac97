package launch

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// TestDevInventory: unyo dev --example-inventory applies the example at
// root (again unchanged on the next start) and names its dev node;
// --inventory with a bad file stores nothing.
func TestDevInventory(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "root.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range 2 {
		node, err := applyDevInventory(t.Context(), DevOptions{ExampleInventory: true}, st, log)
		if err != nil || node != "dc-1-floor-1-1-1-rack-1-server01" {
			t.Fatalf("applyDevInventory = %q, %v; want the example's dev node", node, err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: Rack\nname: r9\nspec: {floor: nowhere}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = applyDevInventory(t.Context(), DevOptions{Inventory: bad}, st, log)
	if err == nil || !strings.Contains(err.Error(), `Rack "r9": spec.floor: no Floor "nowhere"`) {
		t.Errorf("a bad --inventory file: %v", err)
	}
	if _, err := st.GetObject(t.Context(), "Rack", "r9"); err == nil {
		t.Error("rack r9 of a refused inventory was stored")
	}
	if node, err := applyDevInventory(t.Context(), DevOptions{}, st, log); node != "" || err != nil {
		t.Errorf("no inventory flag: %q, %v", node, err)
	}
}
