package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer/cell"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/ipam"
)

// IP address management. provision/ipam decides which addresses a network
// has and in which order they are tried; this file keeps who holds what
// (ip_allocations) and where each network's next allocation starts
// (ip_cursors).
//
// Every write about a network's addresses takes the network's ip_cursors
// row first (lockCursor): allocations, and puts and deletes of the Network
// object. On PostgreSQL that row lock makes root replicas take turns per
// network, and each statement after it sees what the previous holder of
// the lock committed, so an address is never handed out twice. On SQLite
// the one writer (per process, and BEGIN IMMEDIATE across processes) does
// the same.
//
// Concurrent allocations are merged into one transaction (groupCommit): a
// transaction per address would bound allocation by commits per second.

// networkKind is the kind whose objects have addresses.
const networkKind = "Network"

// allocGroupMax bounds the allocations merged into one transaction.
const allocGroupMax = 512

type allocCall struct {
	network, holder string
	at              int64
}

// allocResult is one allocation's outcome: a refusal of one call (the
// network is full or unknown) leaves the others of its group alone.
type allocResult struct {
	a   *unyov1.AddressAllocation
	err error
}

func (s *Store) newAllocGroup() *groupCommit[allocCall, allocResult] {
	return newGroupCommit(allocGroupMax, func(allocCall) int { return 1 }, s.allocateTx)
}

// AllocateAddress implements store.Addresses.
func (s *Store) AllocateAddress(ctx context.Context, network, holder string, at time.Time) (*unyov1.AddressAllocation, error) {
	switch {
	case network == "":
		return nil, errors.New("allocate an address: no network named")
	case holder == "":
		return nil, fmt.Errorf("allocate an address of network %q: no holder named (say who holds it, such as compute/web-0/eth0)", network)
	}
	r, err := s.allocs.do(ctx, allocCall{network: network, holder: holder, at: at.UnixNano()})
	if err == nil {
		err = r.err
	}
	if err != nil {
		return nil, fmt.Errorf("allocate an address of network %q for %q: %w", network, holder, err)
	}
	return r.a, nil
}

// pooled is a network as one allocation transaction sees it.
type pooled struct {
	pool ipam.Pool
	next int64 // ip_cursors.next, advanced as the transaction allocates
	err  error // why nothing can be allocated from it (unknown network)
}

// allocateTx allocates for calls in one transaction, network by network:
// each network is locked and read once, and the addresses its calls need
// are found with one pass over its taken addresses.
func (s *Store) allocateTx(ctx context.Context, calls []allocCall) ([]allocResult, error) {
	byNetwork := map[string][]int{}
	var order []string
	for i, c := range calls {
		if byNetwork[c.network] == nil {
			order = append(order, c.network)
		}
		byNetwork[c.network] = append(byNetwork[c.network], i)
	}
	var out []allocResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = make([]allocResult, len(calls)) // afresh if the transaction is run again
		st := s.stmts(tx)
		for _, name := range order {
			n, err := openPool(ctx, st, name)
			if err != nil {
				return err
			}
			if n.err != nil {
				for _, i := range byNetwork[name] {
					out[i].err = n.err
				}
				continue
			}
			if err := allocateFrom(ctx, st, n, name, calls, byNetwork[name], out); err != nil {
				return err
			}
			up, err := st.get(ctx, updateCursor)
			if err == nil {
				_, err = up.ExecContext(ctx, n.next, name)
			}
			if err != nil {
				return fmt.Errorf("advance the allocation cursor of network %q: %w", name, err)
			}
		}
		return nil
	})
	return out, err
}

const (
	lockCursorQuery = `INSERT INTO ip_cursors (network, next) VALUES ($1, 0)
		ON CONFLICT (network) DO UPDATE SET next = ip_cursors.next RETURNING next`
	selectNetwork = "SELECT body FROM objects WHERE kind = 'Network' AND name = $1"
	updateCursor  = "UPDATE ip_cursors SET next = $1 WHERE network = $2"
)

// lockCursor takes network's cursor row (creating it) for the transaction
// and returns where its next allocation starts.
func lockCursor(ctx context.Context, st *stmtCache, network string) (int64, error) {
	var next int64
	q, err := st.get(ctx, lockCursorQuery)
	if err == nil {
		err = q.QueryRowContext(ctx, network).Scan(&next)
	}
	if err != nil {
		return 0, fmt.Errorf("lock the addresses of network %q: %w", network, err)
	}
	return next, nil
}

// openPool locks network and reads its pool: a node-local network's is
// built in, a Network's comes from its spec as stored now.
func openPool(ctx context.Context, st *stmtCache, network string) (*pooled, error) {
	next, err := lockCursor(ctx, st, network)
	if err != nil {
		return nil, err
	}
	n := &pooled{next: next}
	var spec *unyov1.NetworkSpec
	if _, local := ipam.NodeLocal(network); !local {
		var body []byte
		q, err := st.get(ctx, selectNetwork)
		if err == nil {
			err = q.QueryRowContext(ctx, network).Scan(&body)
		}
		if errors.Is(err, sql.ErrNoRows) {
			n.err = fmt.Errorf("network %q: %w (apply a Network of that name first; a node's own network is node-local/NODE)", network, store.ErrNotFound)
			return n, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read network %q: %w", network, err)
		}
		var net unyov1.Network
		if err := proto.Unmarshal(body, &net); err != nil {
			return nil, fmt.Errorf("decode network %q: %w", network, err)
		}
		spec = net.GetSpec()
	}
	if n.pool, err = ipam.PoolOf(network, spec); err != nil {
		n.err = fmt.Errorf("network %q has no valid addresses: %w", network, err)
	}
	return n, nil
}

const (
	selectHeld  = `SELECT address, allocated_at FROM ip_allocations WHERE network = $1 AND holder = $2 AND released_at = 0`
	selectTaken = `SELECT address FROM ip_allocations WHERE network = $1 AND address >= $2 AND address <= $3
		AND (released_at = 0 OR reusable_at > $4) ORDER BY address LIMIT $5`
	upsertAllocation = `INSERT INTO ip_allocations (network, address, holder, allocated_at, released_at, reusable_at)
		VALUES ($1, $2, $3, $4, 0, 0)
		ON CONFLICT (network, address) DO UPDATE SET holder = excluded.holder, allocated_at = excluded.allocated_at,
		released_at = 0, reusable_at = 0`
)

// allocateFrom allocates for the calls idx of one network n, setting
// their results in out: a holder's address if it holds one, else a new
// one; a call the network has no address left for is refused alone.
func allocateFrom(ctx context.Context, st *stmtCache, n *pooled, network string, calls []allocCall, idx []int, out []allocResult) error {
	held, err := st.get(ctx, selectHeld)
	if err != nil {
		return err
	}
	first := map[string]int{} // holder -> its first call here
	var need []int            // calls needing a new address
	at := calls[idx[0]].at
	for _, i := range idx {
		c := calls[i]
		at = min(at, c.at) // an address still in quarantine for any of them stays so
		if _, dup := first[c.holder]; dup {
			continue // gets what the holder's first call gets
		}
		first[c.holder] = i
		var addr, since int64
		switch err := held.QueryRowContext(ctx, network, c.holder).Scan(&addr, &since); {
		case err == nil:
			out[i].a = allocation(network, addr, c.holder, since, 0, 0)
		case errors.Is(err, sql.ErrNoRows):
			need = append(need, i)
		default:
			return fmt.Errorf("read the address %q holds in network %q: %w", c.holder, network, err)
		}
	}
	if len(need) > 0 {
		taken, err := st.get(ctx, selectTaken)
		if err != nil {
			return err
		}
		cursor := ipam.Addr(0)
		if n.next >= 0 && n.next <= int64(^uint32(0)) {
			cursor = ipam.Addr(n.next)
		}
		free, err := n.pool.NextN(cursor, len(need), func(r ipam.Range, limit int) ([]ipam.Addr, error) {
			rows, err := taken.QueryContext(ctx, network, int64(r.First), int64(r.Last), at, limit)
			if err != nil {
				return nil, err
			}
			return scanAll(rows, func(row scanner) (ipam.Addr, error) {
				var a int64
				err := row.Scan(&a)
				return ipam.Addr(a), err
			})
		})
		if err != nil {
			return fmt.Errorf("find free addresses of network %q: %w", network, err)
		}
		up, err := st.get(ctx, upsertAllocation)
		if err != nil {
			return err
		}
		var full error
		for j, i := range need {
			c := calls[i]
			if j >= len(free) {
				if full == nil {
					full = fullError(ctx, st.tx, network, at, n.pool.Size()) // counts the rows just written
				}
				out[i].err = full
				continue
			}
			if _, err := up.ExecContext(ctx, network, int64(free[j]), c.holder, c.at); err != nil {
				return fmt.Errorf("record address %s of network %q: %w", free[j], network, err)
			}
			out[i].a = allocation(network, int64(free[j]), c.holder, c.at, 0, 0)
			n.next = int64(free[j]) + 1
		}
	}
	for _, i := range idx {
		if f := first[calls[i].holder]; f != i {
			out[i] = out[f]
		}
	}
	return nil
}

// fullError says why network has no address free: all held, or some in
// quarantine (and until when the first comes back).
func fullError(ctx context.Context, tx *sql.Tx, network string, at, size int64) error {
	var held, quarantined, soonest sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT SUM(CASE WHEN released_at = 0 THEN 1 ELSE 0 END),
		SUM(CASE WHEN released_at = 0 THEN 0 ELSE 1 END), MIN(CASE WHEN released_at = 0 THEN NULL ELSE reusable_at END)
		FROM ip_allocations WHERE network = $1 AND (released_at = 0 OR reusable_at > $2)`, network, at).Scan(&held, &quarantined, &soonest)
	if err != nil || quarantined.Int64 == 0 {
		return fmt.Errorf("network %s is full (%d addresses, all allocated): %w", network, size, store.ErrFull)
	}
	return fmt.Errorf("network %s is full (%d addresses: %d allocated, %d in quarantine after release, the first free again at %s): %w",
		network, size, held.Int64, quarantined.Int64, time.Unix(0, soonest.Int64).UTC().Format(time.RFC3339), store.ErrFull)
}

func allocation(network string, addr int64, holder string, allocated, released, reusable int64) *unyov1.AddressAllocation {
	a := &unyov1.AddressAllocation{Network: network, Address: ipam.Addr(addr).String(), Holder: holder,
		AllocatedAt: fromNanos(allocated), ReleasedAt: fromNanos(released)}
	if released != 0 {
		a.ReusableAt = fromNanos(reusable)
	}
	return a
}

// ReleaseAddress implements store.Addresses.
func (s *Store) ReleaseAddress(ctx context.Context, r store.AddressRelease) (*unyov1.AddressAllocation, error) {
	what := fmt.Sprintf("address %s of network %q", r.Address, r.Network)
	where, key := "address = $4", any(nil)
	switch {
	case r.Network == "":
		return nil, errors.New("release an address: no network named")
	case r.Address != "":
		a, err := ipam.ParseAddr(r.Address)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", what, err)
		}
		key = int64(a)
	case r.Holder != "":
		what = fmt.Sprintf("the address %q holds in network %q", r.Holder, r.Network)
		where, key = "holder = $4", r.Holder
	default:
		return nil, fmt.Errorf("release an address of network %q: name the address or its holder", r.Network)
	}
	if r.Quarantine < 0 {
		r.Quarantine = 0
	}
	at, reusable := r.At.UnixNano(), r.At.Add(r.Quarantine).UnixNano()
	var out *unyov1.AddressAllocation
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var addr, since int64
		var holder string
		err := tx.QueryRowContext(ctx, `UPDATE ip_allocations SET released_at = $1, reusable_at = $2
			WHERE network = $3 AND released_at = 0 AND `+where+` RETURNING address, holder, allocated_at`,
			at, reusable, r.Network, key).Scan(&addr, &holder, &since)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s is not allocated: %w", what, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		out = allocation(r.Network, addr, holder, since, at, reusable)
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("release %s: %w", what, err)
	}
	return out, err
}

// ListAllocations implements store.Addresses.
func (s *Store) ListAllocations(ctx context.Context, network string, at time.Time) ([]*unyov1.AddressAllocation, error) {
	q := `SELECT network, address, holder, allocated_at, released_at, reusable_at FROM ip_allocations
		WHERE (released_at = 0 OR reusable_at > $1)`
	args := []any{at.UnixNano()}
	if network != "" {
		q += " AND network = $2"
		args = append(args, network)
	}
	rows, err := s.r.QueryContext(ctx, q+" ORDER BY network, address", args...)
	if err != nil {
		return nil, fmt.Errorf("list the addresses of network %q: %w", network, err)
	}
	out, err := scanAll(rows, func(row scanner) (*unyov1.AddressAllocation, error) {
		var net, holder string
		var addr, since, released, reusable int64
		if err := row.Scan(&net, &addr, &holder, &since, &released, &reusable); err != nil {
			return nil, err
		}
		return allocation(net, addr, holder, since, released, reusable), nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the addresses of network %q: %w", network, err)
	}
	return out, nil
}

// guardNetworkPut refuses a change of a Network that would leave held
// addresses outside its pool, in the put's transaction.
func guardNetworkPut(ctx context.Context, st *stmtCache, n *unyov1.Network) error {
	tx := st.tx
	if _, err := lockCursor(ctx, st, n.GetName()); err != nil {
		return err
	}
	pool, err := ipam.NewPool(n.GetSpec())
	if err != nil {
		return fmt.Errorf("network %q: %w", n.GetName(), err)
	}
	held, err := heldAddresses(ctx, tx, n.GetName())
	if err != nil {
		return err
	}
	var outside []string
	for _, h := range held {
		if a, err := ipam.ParseAddr(h.GetAddress()); err != nil || !pool.Contains(a) {
			outside = append(outside, h.GetAddress()+" ("+h.GetHolder()+")")
		}
	}
	if len(outside) > 0 {
		return fmt.Errorf("network %q: %d allocated addresses would no longer be allocatable under the new spec: %s; release them first: %w",
			n.GetName(), len(outside), cell.FirstFew(outside, 5), store.ErrInUse)
	}
	return nil
}

// guardNetworkDelete refuses to delete a Network with held addresses, and
// otherwise forgets its addresses in quarantine and its cursor.
func guardNetworkDelete(ctx context.Context, st *stmtCache, name string) error {
	tx := st.tx
	if _, err := lockCursor(ctx, st, name); err != nil {
		return err
	}
	held, err := heldAddresses(ctx, tx, name)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		holders := make([]string, len(held))
		for i, h := range held {
			holders[i] = h.GetHolder() + " (" + h.GetAddress() + ")"
		}
		return fmt.Errorf("network %q still has %d allocated addresses, held by %s; release them first: %w", name, len(held), cell.FirstFew(holders, 5), store.ErrInUse)
	}
	for _, q := range []string{"DELETE FROM ip_allocations WHERE network = $1", "DELETE FROM ip_cursors WHERE network = $1"} {
		if _, err := tx.ExecContext(ctx, q, name); err != nil {
			return fmt.Errorf("forget the addresses of network %q: %w", name, err)
		}
	}
	return nil
}

func heldAddresses(ctx context.Context, tx *sql.Tx, network string) ([]*unyov1.AddressAllocation, error) {
	rows, err := tx.QueryContext(ctx, "SELECT address, holder, allocated_at FROM ip_allocations WHERE network = $1 AND released_at = 0 ORDER BY address", network)
	if err != nil {
		return nil, fmt.Errorf("read the addresses of network %q: %w", network, err)
	}
	return scanAll(rows, func(row scanner) (*unyov1.AddressAllocation, error) {
		var addr, since int64
		var holder string
		err := row.Scan(&addr, &holder, &since)
		return allocation(network, addr, holder, since, 0, 0), err
	})
}

// stmtCache gives a transaction the statements it runs again and again.
// The hot ones are prepared once per store when it opens (prepareHot) and
// bound to the transaction here, which on SQLite's one writer connection
// reuses the prepared statement: parsing the SQL costs more than running
// it. Others are prepared once per transaction.
type stmtCache struct {
	tx     *sql.Tx
	shared map[string]*sql.Stmt
	m      map[string]*sql.Stmt
}

func (s *Store) stmts(tx *sql.Tx) *stmtCache {
	return &stmtCache{tx: tx, shared: s.prepared}
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if parent, ok := c.shared[query]; ok {
		st = c.tx.StmtContext(ctx, parent)
	} else {
		var err error
		if st, err = c.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st, nil
}

// hotQueries are prepared when a store opens: they run once or more per
// allocated address, stored object or heartbeat flush. (Preparing on the database inside a
// transaction would wait for SQLite's one writer connection, which the
// transaction holds.)
var hotQueries = []string{selectObject, upsertObject, lockCursorQuery, selectNetwork, selectHeld, selectTaken, upsertAllocation, updateCursor, touchNodesQuery}

func (s *Store) prepareHot(ctx context.Context) error {
	s.prepared = map[string]*sql.Stmt{}
	for _, q := range slices.Concat(hotQueries, eventHotQueries(s.d)) {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", strings.Fields(q)[0], err)
		}
		s.prepared[q] = st
	}
	return nil
}
