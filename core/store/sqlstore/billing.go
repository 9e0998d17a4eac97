package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/billing"
)

// The billing ledger: insertReservation opens a row and deleteReservation
// closes it, in their transactions, so that no reservation is ever held
// unbilled or billed after its release, whoever reserves (placement, a
// drain's replacement, a rolling update's surge).

// openLedgerRow starts billing res at compute c's price on its node's
// machine model. c (its flavor, cluster and the price root resolved) and
// the model are what the reserving transaction read already, so that
// opening the row costs one insert; a nil c (a reservation without a
// compute record, in tests of the store's capacity accounting) is billed
// at no price, under no flavor.
func openLedgerRow(ctx context.Context, tx *sql.Tx, res store.Reservation, c *unyov1.Compute, model string) error {
	price := billing.Price(c.GetPrice().GetPerHour(), c.GetPrice().GetModelPrices(), model)
	if _, err := tx.ExecContext(ctx, `INSERT INTO billing_ledger (compute, service, flavor, node, cluster, price_per_hour, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, res.Compute, res.Service, c.GetSpec().GetFlavor(), res.Node, c.GetCluster(), price, res.ReservedAt.UnixNano()); err != nil {
		return fmt.Errorf("open the billing ledger's row of %s on %s: %w", res.Compute, res.Node, err)
	}
	return nil
}

// closeLedgerRow ends the billing of compute's reservation on node; a row
// closed already stays as it is.
func closeLedgerRow(ctx context.Context, tx *sql.Tx, compute, node string, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE billing_ledger SET ended_at = $1
		WHERE compute = $2 AND node = $3 AND ended_at IS NULL`, at.UnixNano(), compute, node); err != nil {
		return fmt.Errorf("close the billing ledger's row of %s on %s: %w", compute, node, err)
	}
	return nil
}

func (s *Store) Ledger(ctx context.Context, since, until time.Time) ([]billing.Entry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT compute, service, flavor, node, cluster, price_per_hour, started_at, ended_at
		FROM billing_ledger WHERE started_at < $1 AND (ended_at IS NULL OR ended_at > $2) ORDER BY id`,
		until.UnixNano(), since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("read the billing ledger: %w", err)
	}
	out, err := scanAll(rows, func(row scanner) (billing.Entry, error) {
		var e billing.Entry
		var start int64
		var end sql.NullInt64
		if err := row.Scan(&e.Compute, &e.Service, &e.Flavor, &e.Node, &e.Cluster, &e.PricePerHour, &start, &end); err != nil {
			return e, err
		}
		e.Start = time.Unix(0, start)
		if end.Valid {
			e.End = time.Unix(0, end.Int64)
		}
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the billing ledger: %w", err)
	}
	return out, nil
}
