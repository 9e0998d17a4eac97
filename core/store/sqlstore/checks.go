package sqlstore

import (
	"context"
	"fmt"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// Checks are objects of kind Check (see objects.go); these are the typed
// reads and writes the agents' configuration and the tests use.

const kindCheck = "Check"

// PutCheck creates or replaces a check (see putBatch.put).
func (s *Store) PutCheck(ctx context.Context, c *unyov1.Check) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}})
}

// DeleteCheck removes a check and advances the checks revision.
func (s *Store) DeleteCheck(ctx context.Context, name string) error {
	return s.DeleteObject(ctx, kindCheck, name)
}

func (s *Store) GetCheck(ctx context.Context, name string) (*unyov1.Check, error) {
	o, err := s.GetObject(ctx, kindCheck, name)
	return o.GetCheck(), err
}

// ListChecks returns every check, sorted by name.
func (s *Store) ListChecks(ctx context.Context) ([]*unyov1.Check, error) {
	rows, err := s.objectRows(ctx, s.r, kindCheck, "", false)
	if err != nil {
		return nil, fmt.Errorf("list checks: %w", err)
	}
	out := make([]*unyov1.Check, len(rows))
	for i, r := range rows {
		out[i] = r.o.GetCheck()
	}
	return out, nil
}

// ChecksRevision changes with every change to checks; 0 before the first.
func (s *Store) ChecksRevision(ctx context.Context) (int64, error) {
	return s.ObjectsRevision(ctx, kindCheck)
}
