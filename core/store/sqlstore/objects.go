package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// PutObjects stores a whole apply in one transaction. database/sql rolls the
// transaction back when ctx ends, so a client that gave up leaves nothing
// behind; the loop also stops at once instead of writing into a dead
// transaction.
func (s *Store) PutObjects(ctx context.Context, objs []*unyov1.Object) ([]store.PutResult, error) {
	for i, o := range objs {
		if err := checkPutObject(o); err != nil {
			return nil, fmt.Errorf("put objects[%d]: %w", i, err)
		}
	}
	results := make([]store.PutResult, len(objs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		b := &putBatch{tx: tx}
		// Lock the counters in one order (checks, then rules) so that
		// concurrent applies on PostgreSQL wait for each other instead of
		// deadlocking, and two puts of one new name cannot both see it absent.
		if err := b.lockCounters(ctx, s, objs); err != nil {
			return err
		}
		for i, o := range objs {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped after %d of %d objects, nothing was stored: %w", i, len(objs), err)
			}
			var err error
			results[i], err = b.put(ctx, o)
			if err != nil {
				return fmt.Errorf("objects[%d] (%s %q): %w", i, objectKind(o), objectName(o), err)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// The driver's own error for a cancelled statement may not say why.
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("put objects: %w", err)
	}
	return results, nil
}

// putOne stores one object in its own transaction.
func (s *Store) putOne(ctx context.Context, o *unyov1.Object) (store.PutResult, error) {
	if err := checkPutObject(o); err != nil {
		return "", err
	}
	var result store.PutResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		b := &putBatch{tx: tx}
		if err := b.lockCounters(ctx, s, []*unyov1.Object{o}); err != nil {
			return err
		}
		var err error
		result, err = b.put(ctx, o)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("put %s %q: %w", objectKind(o), objectName(o), err)
	}
	return result, nil
}

func checkPutObject(o *unyov1.Object) error {
	if objectKind(o) == "" {
		return errors.New("the object has no kind (check, event_rule or maintenance)")
	}
	if objectName(o) == "" {
		return fmt.Errorf("the %s has no name", objectKind(o))
	}
	return nil
}

func objectKind(o *unyov1.Object) string {
	switch o.GetKind().(type) {
	case *unyov1.Object_Check:
		return "check"
	case *unyov1.Object_EventRule:
		return kindRule
	case *unyov1.Object_Maintenance:
		return kindMaintenance
	}
	return ""
}

func objectName(o *unyov1.Object) string {
	switch k := o.GetKind().(type) {
	case *unyov1.Object_Check:
		return k.Check.GetName()
	case *unyov1.Object_EventRule:
		return k.EventRule.GetName()
	case *unyov1.Object_Maintenance:
		return k.Maintenance.GetName()
	}
	return ""
}

// putBatch is one write transaction storing objects: its prepared statements
// (a large apply runs each thousands of times) and the revisions it took.
type putBatch struct {
	tx *sql.Tx
	// checksRev and rulesRev are 0 until an object of theirs changes; then
	// they hold the one new revision every later change shares.
	checksRev, rulesRev int64
	stmts               map[string]*sql.Stmt
}

func (b *putBatch) lockCounters(ctx context.Context, s *Store, objs []*unyov1.Object) error {
	var checks, rules bool
	for _, o := range objs {
		if _, ok := o.GetKind().(*unyov1.Object_Check); ok {
			checks = true
		} else {
			rules = true
		}
	}
	if checks {
		if _, err := s.counter(ctx, b.tx, "checks_revision"); err != nil {
			return err
		}
	}
	if rules {
		if _, err := s.counter(ctx, b.tx, "rules_revision"); err != nil {
			return err
		}
	}
	return nil
}

// stmt prepares query in the transaction once; the transaction closes it.
func (b *putBatch) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := b.stmts[query]; ok {
		return st, nil
	}
	st, err := b.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if b.stmts == nil {
		b.stmts = map[string]*sql.Stmt{}
	}
	b.stmts[query] = st
	return st, nil
}

// revision returns the batch's new value of counter, advancing the counter
// the first time.
func (b *putBatch) revision(ctx context.Context, counter string, rev *int64) (int64, error) {
	if *rev == 0 {
		v, err := bump(ctx, b.tx, counter, 1)
		if err != nil {
			return 0, err
		}
		*rev = v
	}
	return *rev, nil
}

func (b *putBatch) put(ctx context.Context, o *unyov1.Object) (store.PutResult, error) {
	switch k := o.GetKind().(type) {
	case *unyov1.Object_Check:
		return b.putCheck(ctx, k.Check)
	case *unyov1.Object_EventRule:
		return b.putObject(ctx, kindRule, k.EventRule.GetName(), k.EventRule, ruleUserPart, stampRule)
	case *unyov1.Object_Maintenance:
		return b.putObject(ctx, kindMaintenance, k.Maintenance.GetName(), k.Maintenance, maintenanceUserPart, stampMaintenance)
	}
	return "", errors.New("the object has no kind")
}

const (
	selectCheck = "SELECT " + checkColumns + " FROM checks WHERE name = $1"
	upsertCheck = `
		INSERT INTO checks (name, revision, created_at, updated_at, body)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET
			revision = excluded.revision,
			updated_at = excluded.updated_at,
			body = excluded.body`
	selectObject = "SELECT created_at, body FROM objects WHERE kind = $1 AND name = $2"
	upsertObject = `INSERT INTO objects (kind, name, created_at, updated_at, body) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (kind, name) DO UPDATE SET updated_at = excluded.updated_at, body = excluded.body`
)

// putCheck compares the incoming check with the stored one ignoring what the
// store maintains (revision, created_at, updated_at): equal is Unchanged and
// writes nothing; otherwise the check records the batch's checks revision.
func (b *putBatch) putCheck(ctx context.Context, c *unyov1.Check) (store.PutResult, error) {
	sel, err := b.stmt(ctx, selectCheck)
	if err != nil {
		return "", err
	}
	old, err := scanCheck(sel.QueryRowContext(ctx, c.GetName()))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	if old != nil && proto.Equal(userPart(old), userPart(c)) {
		return store.Unchanged, nil
	}
	rev, err := b.revision(ctx, "checks_revision", &b.checksRev)
	if err != nil {
		return "", err
	}
	t := now()
	created, result := t, store.Created
	if old != nil {
		created, result = toNanos(old.GetCreatedAt()), store.Configured
	}
	stored := proto.Clone(c).(*unyov1.Check)
	stored.Revision = rev
	stored.CreatedAt = fromNanos(created)
	stored.UpdatedAt = fromNanos(t)
	body, err := proto.Marshal(stored)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	up, err := b.stmt(ctx, upsertCheck)
	if err != nil {
		return "", err
	}
	if _, err := up.ExecContext(ctx, c.GetName(), rev, created, t, body); err != nil {
		return "", err
	}
	return result, nil
}

// putObject stores an event rule or maintenance record (msg, whose
// created/updated stamps the store keeps) unless nothing the user wrote
// changed; a change records the batch's rules revision.
func (b *putBatch) putObject(ctx context.Context, kind, name string, msg proto.Message, userPart func(proto.Message) proto.Message, stamp func(m proto.Message, created, updated int64)) (store.PutResult, error) {
	sel, err := b.stmt(ctx, selectObject)
	if err != nil {
		return "", err
	}
	var created int64
	var body []byte
	var result store.PutResult
	err = sel.QueryRowContext(ctx, kind, name).Scan(&created, &body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		result, created = store.Created, now()
	case err != nil:
		return "", err
	default:
		old := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(body, old); err != nil {
			return "", fmt.Errorf("decode stored %s: %w", kind, err)
		}
		if proto.Equal(userPart(old), userPart(msg)) {
			return store.Unchanged, nil
		}
		result = store.Configured
	}
	if _, err := b.revision(ctx, "rules_revision", &b.rulesRev); err != nil {
		return "", err
	}
	t := now()
	stored := proto.Clone(msg)
	stamp(stored, created, t)
	enc, err := proto.Marshal(stored)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	up, err := b.stmt(ctx, upsertObject)
	if err != nil {
		return "", err
	}
	if _, err := up.ExecContext(ctx, kind, name, created, t, enc); err != nil {
		return "", err
	}
	return result, nil
}
