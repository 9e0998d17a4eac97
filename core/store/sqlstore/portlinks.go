package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"

	"github.com/unyo-ops/unyo/core/store"
)

// portLinkRange is the range every node's port link addresses come from
// (the agent's portnet.LinkRange): 8,192 per node.
var portLinkRange = netip.MustParsePrefix("169.254.32.0/19")

const portLinkSlots = 1 << (32 - 19)

// portLinkAddr is the address of slot.
func portLinkAddr(slot int64) string {
	b := portLinkRange.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(slot)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// allocPortLink gives compute's reservation on node the lowest free link
// slot of the node (insertReservation's transaction: the node's row is
// locked there, so two placements on one node do not race for a slot).
func allocPortLink(ctx context.Context, tx *sql.Tx, compute, node string) error {
	rows, err := tx.QueryContext(ctx, "SELECT slot FROM port_links WHERE node = $1 ORDER BY slot", node)
	if err != nil {
		return fmt.Errorf("port link of %q on %q: %w", compute, node, err)
	}
	used, err := scanAll(rows, func(row scanner) (int64, error) {
		var s int64
		return s, row.Scan(&s)
	})
	if err != nil {
		return fmt.Errorf("port link of %q on %q: %w", compute, node, err)
	}
	slot := int64(0)
	for _, u := range used {
		if u != slot {
			break
		}
		slot++
	}
	if slot >= portLinkSlots {
		return fmt.Errorf("port link of %q: node %q has all %d link addresses of %s in use: %w", compute, node, portLinkSlots, portLinkRange, store.ErrFull)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO port_links (compute, node, slot) VALUES ($1, $2, $3)", compute, node, slot); err != nil {
		return fmt.Errorf("port link of %q on %q: %w", compute, node, err)
	}
	return nil
}

// releasePortLink frees compute's link slot on node (every node when node
// is "").
func releasePortLink(ctx context.Context, tx *sql.Tx, compute, node string) error {
	q, args := "DELETE FROM port_links WHERE compute = $1", []any{compute}
	if node != "" {
		q, args = "DELETE FROM port_links WHERE compute = $1 AND node = $2", []any{compute, node}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("release port link of %q: %w", compute, err)
	}
	return nil
}
