package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store"
)

// Every kind of object lives in one table, keyed by kind and name, its
// message in body. The store maintains three fields of any kind whose
// message has them: revision (the objects revision of its last change),
// created_at and updated_at; the columns are the truth, the copies in the
// body are overwritten on reads.
//
// objectsRevision advances once per transaction that changes objects;
// each kind's counter (kindRevision) records the objectsRevision of the
// kind's last change, so a reader of several kinds takes their maximum.
const objectsRevision = "objects_revision"

func kindRevision(kind string) string { return "revision:" + kind }

// PutObjects stores a whole apply in one transaction (ApplyObjects without
// references or check).
func (s *Store) PutObjects(ctx context.Context, objs []*unyov1.Object) ([]store.PutResult, error) {
	return s.ApplyObjects(ctx, objs, store.ApplyOptions{})
}

// errDryRun ends a dry run's transaction, which inTx then rolls back.
var errDryRun = errors.New("dry run: rolled back")

// ApplyObjects stores a whole apply in one transaction. database/sql rolls
// the transaction back when ctx ends, so a client that gave up leaves
// nothing behind; the loop also stops at once instead of writing into a
// dead transaction. References are checked after every object of the batch
// is written, so a batch may name its own objects in any order.
func (s *Store) ApplyObjects(ctx context.Context, objs []*unyov1.Object, opts store.ApplyOptions) ([]store.PutResult, error) {
	for i, o := range objs {
		if err := checkPutObject(o); err != nil {
			return nil, fmt.Errorf("put objects[%d]: %w", i, err)
		}
	}
	results := make([]store.PutResult, len(objs))
	// refused is why the batch is refused (a dangling reference, a broken
	// rule), returned as it is: it names the document and field already.
	var refused error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		b, err := s.newPutBatch(ctx, tx)
		if err != nil {
			return err
		}
		for i, o := range objs {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped after %d of %d objects, nothing was stored: %w", i, len(objs), err)
			}
			results[i], err = b.put(ctx, o)
			if err == nil && results[i] != store.Unchanged && opts.Refs != nil {
				err = b.putRefs(ctx, o, results[i], opts.Refs(o))
			}
			if err != nil {
				return fmt.Errorf("objects[%d] (%s %q): %w", i, kinds.KindOf(o), kinds.Name(o), err)
			}
		}
		refErr, err := b.checkRefs(ctx)
		if err != nil {
			return err
		}
		if refErr != nil {
			refused = refErr
			return refused
		}
		if opts.Check != nil {
			if refused = opts.Check(ctx, txReader{s: s, tx: tx}); refused != nil {
				return refused
			}
		}
		if opts.DryRun {
			return errDryRun // rolls the transaction back
		}
		return b.finish(ctx)
	})
	if refused != nil && errors.Is(err, refused) {
		return nil, refused
	}
	if opts.DryRun && errors.Is(err, errDryRun) {
		return results, nil
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// The driver's own error for a cancelled statement may not say why.
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("put objects: %w", err)
	}
	return results, nil
}

// putRefs replaces the references o makes with refs; a new object has
// none to replace. One prepared single-row INSERT per reference is the
// fastest on SQLite (modernc's binding of many-row statements costs more
// than it saves).
func (b *putBatch) putRefs(ctx context.Context, o *unyov1.Object, result store.PutResult, refs []store.Ref) error {
	kind, name := kinds.KindOf(o), kinds.Name(o)
	if result != store.Created {
		del, err := b.stmt(ctx, "DELETE FROM object_refs WHERE kind = $1 AND name = $2")
		if err != nil {
			return err
		}
		if _, err := del.ExecContext(ctx, kind, name); err != nil {
			return fmt.Errorf("replace references: %w", err)
		}
	}
	if len(refs) == 0 {
		return nil
	}
	ins, err := b.stmt(ctx, `INSERT INTO object_refs (kind, name, field, target_kind, target_name) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`)
	if err != nil {
		return err
	}
	for _, r := range refs {
		if _, err := ins.ExecContext(ctx, kind, name, r.Field, r.Kind, r.Name); err != nil {
			return fmt.Errorf("record reference %s: %w", r.Field, err)
		}
		b.refs = append(b.refs, batchRef{kind: kind, name: name, ref: r})
	}
	return nil
}

// checkRefs finds the first reference of the batch to an object that does
// not exist, now that the batch's own objects are written. Targets are
// looked up once each: thousands of resources name a few racks.
func (b *putBatch) checkRefs(ctx context.Context) (*store.RefError, error) {
	if len(b.refs) == 0 {
		return nil, nil
	}
	sel, err := b.stmt(ctx, "SELECT 1 FROM objects WHERE kind = $1 AND name = $2")
	if err != nil {
		return nil, err
	}
	exists := map[[2]string]bool{}
	for _, r := range b.refs {
		key := [2]string{r.ref.Kind, r.ref.Name}
		ok, seen := exists[key]
		if !seen {
			var one int
			switch err := sel.QueryRowContext(ctx, r.ref.Kind, r.ref.Name).Scan(&one); {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return nil, fmt.Errorf("check references: %w", err)
			default:
				ok = true
			}
			exists[key] = ok
		}
		if !ok {
			return &store.RefError{Kind: r.kind, Name: r.name, Ref: r.ref}, nil
		}
	}
	return nil, nil
}

// batchRef is a reference recorded by a batch, checked before it commits.
type batchRef struct {
	kind, name string
	ref        store.Ref
}

// txReader reads objects and references inside a write transaction.
type txReader struct {
	s  *Store
	tx *sql.Tx
}

func (r txReader) GetObject(ctx context.Context, kind, name string) (*unyov1.Object, error) {
	return r.s.getObject(ctx, r.tx, kind, name)
}

func (r txReader) Referrers(ctx context.Context, kind, name string) ([]store.Referrer, error) {
	return referrers(ctx, r.tx, kind, name)
}

// Referrers returns the references made to an object.
func (s *Store) Referrers(ctx context.Context, kind, name string) ([]store.Referrer, error) {
	return referrers(ctx, s.r, kind, name)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func referrers(ctx context.Context, q querier, kind, name string) ([]store.Referrer, error) {
	rows, err := q.QueryContext(ctx, `SELECT kind, name, field FROM object_refs WHERE target_kind = $1 AND target_name = $2
		ORDER BY kind, name, field`, kind, name)
	if err != nil {
		return nil, fmt.Errorf("read the references to %s %q: %w", kind, name, err)
	}
	out, err := scanAll(rows, func(row scanner) (store.Referrer, error) {
		var r store.Referrer
		return r, row.Scan(&r.Kind, &r.Name, &r.Field)
	})
	if err != nil {
		return nil, fmt.Errorf("read the references to %s %q: %w", kind, name, err)
	}
	return out, nil
}

// putOne stores one object in its own transaction.
func (s *Store) putOne(ctx context.Context, o *unyov1.Object) (store.PutResult, error) {
	if err := checkPutObject(o); err != nil {
		return "", err
	}
	var result store.PutResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		b, err := s.newPutBatch(ctx, tx)
		if err != nil {
			return err
		}
		if result, err = b.put(ctx, o); err != nil {
			return err
		}
		return b.finish(ctx)
	})
	if err != nil {
		return "", fmt.Errorf("put %s %q: %w", kinds.KindOf(o), kinds.Name(o), err)
	}
	return result, nil
}

func checkPutObject(o *unyov1.Object) error {
	kind := kinds.KindOf(o)
	if kind == "" {
		return errors.New("the object has no kind")
	}
	if kinds.Name(o) == "" {
		return fmt.Errorf("the %s has no name", kind)
	}
	return nil
}

// putBatch is one write transaction storing objects: its prepared statements
// (a large apply runs each thousands of times) and the revision it took.
type putBatch struct {
	tx *sql.Tx
	// rev is 0 until an object changes; then it holds the one new objects
	// revision every later change shares.
	rev     int64
	changed []string // kinds with a change
	refs    []batchRef
	stmts   *stmtCache
	layouts map[string]layout
}

// layout returns the layout of kind, looking it up once per batch.
func (b *putBatch) layout(kind string) (layout, error) {
	if l, ok := b.layouts[kind]; ok {
		return l, nil
	}
	l, err := layoutOf(kind)
	if err != nil {
		return layout{}, err
	}
	if b.layouts == nil {
		b.layouts = map[string]layout{}
	}
	b.layouts[kind] = l
	return l, nil
}

// newPutBatch locks the objects revision first, so that concurrent writes
// on PostgreSQL queue instead of deadlocking, and two puts of one new name
// cannot both see it absent.
func (s *Store) newPutBatch(ctx context.Context, tx *sql.Tx) (*putBatch, error) {
	if _, err := s.counter(ctx, tx, objectsRevision); err != nil {
		return nil, err
	}
	return &putBatch{tx: tx, stmts: s.stmts(tx)}, nil
}

// stmt prepares query in the transaction once; the transaction closes it.
func (b *putBatch) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	return b.stmts.get(ctx, query)
}

// revision returns the batch's new objects revision, advancing it the
// first time, and notes that kind changed.
func (b *putBatch) revision(ctx context.Context, kind string) (int64, error) {
	if b.rev == 0 {
		v, err := bump(ctx, b.tx, objectsRevision, 1)
		if err != nil {
			return 0, err
		}
		b.rev = v
	}
	if !slices.Contains(b.changed, kind) {
		b.changed = append(b.changed, kind)
	}
	return b.rev, nil
}

// finish records the batch's revision as the last change of every kind it
// changed.
func (b *putBatch) finish(ctx context.Context) error {
	for _, kind := range b.changed {
		if _, err := b.tx.ExecContext(ctx, `INSERT INTO counters (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, kindRevision(kind), b.rev); err != nil {
			return fmt.Errorf("record the revision of %s: %w", kind, err)
		}
	}
	return nil
}

const (
	selectObject = "SELECT created_at, body FROM objects WHERE kind = $1 AND name = $2"
	upsertObject = `INSERT INTO objects (kind, name, revision, created_at, updated_at, body) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (kind, name) DO UPDATE SET revision = excluded.revision, updated_at = excluded.updated_at, body = excluded.body`
)

// put compares the incoming object with the stored one ignoring what the
// store maintains: equal is Unchanged and writes nothing; otherwise the
// object records the batch's revision.
func (b *putBatch) put(ctx context.Context, o *unyov1.Object) (store.PutResult, error) {
	kind, name, msg := kinds.KindOf(o), kinds.Name(o), kinds.Message(o)
	l, err := b.layout(kind)
	if err != nil {
		return "", err
	}
	sel, err := b.stmt(ctx, selectObject)
	if err != nil {
		return "", err
	}
	var created int64
	var body []byte
	result, t := store.Configured, now()
	switch err := sel.QueryRowContext(ctx, kind, name).Scan(&created, &body); {
	case errors.Is(err, sql.ErrNoRows):
		result, created = store.Created, t
	case err != nil:
		return "", err
	default:
		old := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(body, old); err != nil {
			return "", fmt.Errorf("decode stored %s: %w", kind, err)
		}
		if proto.Equal(l.userPart(old), l.userPart(msg)) {
			return store.Unchanged, nil
		}
	}
	if n, ok := msg.(*unyov1.Network); ok {
		if err := guardNetworkPut(ctx, b.stmts, n); err != nil {
			return "", err
		}
	}
	rev, err := b.revision(ctx, kind)
	if err != nil {
		return "", err
	}
	stored := proto.Clone(msg)
	l.stamp(stored, rev, created, t)
	enc, err := proto.Marshal(stored)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	up, err := b.stmt(ctx, upsertObject)
	if err != nil {
		return "", err
	}
	if _, err := up.ExecContext(ctx, kind, name, rev, created, t, enc); err != nil {
		return "", err
	}
	if kind == kindCheck && result == store.Created {
		// Applied again: its results count from now on.
		if _, err := b.tx.ExecContext(ctx, "DELETE FROM counters WHERE name = $1", checkTombstone+name); err != nil {
			return "", fmt.Errorf("forget that check %q was deleted: %w", name, err)
		}
	}
	return result, nil
}

// layout is where a kind's message keeps the fields the store maintains,
// looked up once per query or batch rather than once per row.
type layout struct {
	member                           protoreflect.FieldDescriptor // of Object's oneof
	name, revision, created, updated protoreflect.FieldDescriptor // nil where the kind has none
}

func layoutOf(kind string) (layout, error) {
	l := layout{member: kinds.Member(kind)}
	if l.member == nil {
		return layout{}, fmt.Errorf("%s: no such kind", kind)
	}
	fields := l.member.Message().Fields()
	if f := fields.ByName("name"); f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
		l.name = f
	}
	if f := fields.ByName("revision"); f != nil && f.Kind() == protoreflect.Int64Kind && !f.IsList() {
		l.revision = f
	}
	timestamp := func(name protoreflect.Name) protoreflect.FieldDescriptor {
		if f := fields.ByName(name); f != nil && f.Message() != nil && f.Message().FullName() == "google.protobuf.Timestamp" {
			return f
		}
		return nil
	}
	l.created, l.updated = timestamp("created_at"), timestamp("updated_at")
	return l, nil
}

// stamp sets the fields the store maintains, where the kind has them.
func (l layout) stamp(m proto.Message, rev, created, updated int64) {
	r := m.ProtoReflect()
	if l.revision != nil {
		r.Set(l.revision, protoreflect.ValueOfInt64(rev))
	}
	if l.created != nil {
		r.Set(l.created, protoreflect.ValueOfMessage(fromNanos(created).ProtoReflect()))
	}
	if l.updated != nil {
		r.Set(l.updated, protoreflect.ValueOfMessage(fromNanos(updated).ProtoReflect()))
	}
}

// userPart strips what the store maintains, leaving what the user wrote.
func (l layout) userPart(m proto.Message) proto.Message {
	m = proto.Clone(m)
	for _, f := range [...]protoreflect.FieldDescriptor{l.revision, l.created, l.updated} {
		if f != nil {
			m.ProtoReflect().Clear(f)
		}
	}
	return m
}

// DeleteObject removes an object and its count, and advances its kind's
// revision.
func (s *Store) DeleteObject(ctx context.Context, kind, name string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		b, err := s.newPutBatch(ctx, tx)
		if err != nil {
			return err
		}
		// Checked after the lock newPutBatch takes: no apply can add a
		// reference between this check and the commit.
		by, err := referrers(ctx, tx, kind, name)
		if err != nil {
			return err
		}
		// An object referring to itself (a cable between two of its own
		// ports) does not hold itself back.
		by = slices.DeleteFunc(by, func(r store.Referrer) bool { return r.Kind == kind && r.Name == name })
		if len(by) > 0 {
			return &store.ReferencedError{Kind: kind, Name: name, By: by}
		}
		if kind == networkKind {
			if err := guardNetworkDelete(ctx, b.stmts, name); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM objects WHERE kind = $1 AND name = $2", kind, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound(kind, name)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM object_counts WHERE kind = $1 AND name = $2", kind, name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM object_refs WHERE kind = $1 AND name = $2", kind, name); err != nil {
			return err
		}
		if kind == kindCheck {
			if err := buryCheck(ctx, tx, name); err != nil {
				return err
			}
		}
		if _, err := b.revision(ctx, kind); err != nil {
			return err
		}
		return b.finish(ctx)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrReferenced) && !errors.Is(err, store.ErrInUse) {
		return fmt.Errorf("delete %s %q: %w", kind, name, err)
	}
	return err
}

// storedObject is one row of objects with its count.
type storedObject struct {
	o     *unyov1.Object
	m     proto.Message
	count int64
}

// objectRows reads objects of a kind, with their counts if counted: one
// by name, or all sorted by name.
func (s *Store) objectRows(ctx context.Context, q querier, kind, name string, counted bool) ([]storedObject, error) {
	query := "SELECT o.name, o.revision, o.created_at, o.updated_at, o.body, 0 FROM objects o WHERE o.kind = $1"
	if counted {
		query = `SELECT o.name, o.revision, o.created_at, o.updated_at, o.body, COALESCE(c.count, 0)
		FROM objects o LEFT JOIN object_counts c ON c.kind = o.kind AND c.name = o.name WHERE o.kind = $1`
	}
	args := []any{kind}
	if name != "" {
		query += " AND o.name = $2"
		args = append(args, name)
	}
	l, err := layoutOf(kind)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query+" ORDER BY o.name", args...)
	if err != nil {
		return nil, err
	}
	out, err := scanAll(rows, func(row scanner) (storedObject, error) {
		var (
			n                 string
			rev, created, upd int64
			body              []byte
			count             int64
		)
		if err := row.Scan(&n, &rev, &created, &upd, &body, &count); err != nil {
			return storedObject{}, err
		}
		o, m := kinds.NewIn(l.member)
		if err := proto.Unmarshal(body, m); err != nil {
			return storedObject{}, fmt.Errorf("decode %s %q: %w", kind, n, err)
		}
		if l.name != nil {
			m.ProtoReflect().Set(l.name, protoreflect.ValueOfString(n))
		}
		l.stamp(m, rev, created, upd)
		return storedObject{o: o, m: m, count: count}, nil
	})
	if err != nil {
		return nil, err
	}
	if name != "" && len(out) == 0 {
		return nil, notFound(kind, name)
	}
	return out, nil
}

// GetObject returns one object.
func (s *Store) GetObject(ctx context.Context, kind, name string) (*unyov1.Object, error) {
	return s.getObject(ctx, s.r, kind, name)
}

func (s *Store) getObject(ctx context.Context, q querier, kind, name string) (*unyov1.Object, error) {
	rows, err := s.objectRows(ctx, q, kind, name, false)
	if errors.Is(err, store.ErrNotFound) {
		return nil, err // names kind and name already
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %q: %w", kind, name, err)
	}
	return rows[0].o, nil
}

// ListObjects returns every object of a kind sorted by name.
func (s *Store) ListObjects(ctx context.Context, kind string) ([]*unyov1.Object, error) {
	rows, err := s.objectRows(ctx, s.r, kind, "", false)
	if err != nil {
		return nil, fmt.Errorf("list %s objects: %w", kind, err)
	}
	out := make([]*unyov1.Object, len(rows))
	for i, r := range rows {
		out[i] = r.o
	}
	return out, nil
}

// ObjectCounts returns the counts kept beside objects of a kind, by name.
func (s *Store) ObjectCounts(ctx context.Context, kind string) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT name, count FROM object_counts WHERE kind = $1", kind)
	if err != nil {
		return nil, fmt.Errorf("read the counts of %s objects: %w", kind, err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("read the counts of %s objects: %w", kind, err)
		}
		counts[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the counts of %s objects: %w", kind, err)
	}
	return counts, nil
}

// ObjectsRevision is the revision of the last change to an object of one
// of kinds; 0 before the first.
func (s *Store) ObjectsRevision(ctx context.Context, kinds ...string) (int64, error) {
	if len(kinds) == 0 {
		return 0, nil
	}
	var b strings.Builder
	args := make([]any, len(kinds))
	for i, k := range kinds {
		args[i] = kindRevision(k)
	}
	placeholders(&b, 1, len(kinds))
	var rev int64
	err := s.r.QueryRowContext(ctx, "SELECT COALESCE(MAX(value), 0) FROM counters WHERE name IN ("+b.String()+")", args...).Scan(&rev)
	if err != nil {
		return 0, fmt.Errorf("read the revision of %s: %w", strings.Join(kinds, ", "), err)
	}
	return rev, nil
}

// counter reads a named counter, locking it for the transaction on PostgreSQL.
func (s *Store) counter(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = $1"+s.d.forUpdate, name).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read counter %s: %w", name, err)
	}
	return v, nil
}

const bumpQuery = "UPDATE counters SET value = value + $1 WHERE name = $2 RETURNING value"

func bump(ctx context.Context, tx *sql.Tx, name string, by int64) (int64, error) {
	var v int64
	if err := tx.QueryRowContext(ctx, bumpQuery, by, name).Scan(&v); err != nil {
		return 0, fmt.Errorf("advance counter %s: %w", name, err)
	}
	return v, nil
}

// bumpWith is bump through st, for the hot transactions.
func bumpWith(ctx context.Context, st *stmtCache, name string, by int64) (int64, error) {
	q, err := st.get(ctx, bumpQuery)
	if err != nil {
		return 0, fmt.Errorf("advance counter %s: %w", name, err)
	}
	var v int64
	if err := q.QueryRowContext(ctx, by, name).Scan(&v); err != nil {
		return 0, fmt.Errorf("advance counter %s: %w", name, err)
	}
	return v, nil
}
