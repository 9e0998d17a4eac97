package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/apihook"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// The actions outbox holds api_hook deliveries and action plugin runs
// until the worker finished them. A job's body is built here, in the
// commit, from its payload and the alert the commit produced, so that what
// is sent is exactly what was stored.

// insertAction queues job with its body. applied holds the alert each of
// the decision's alert operations produced.
func insertAction(ctx context.Context, tx *sql.Tx, job pipeline.ActionJob, applied []*unyov1.Alert) error {
	var alert *unyov1.Alert
	for _, i := range job.AlertOps {
		if i >= 0 && i < len(applied) && applied[i] != nil {
			alert = applied[i]
		}
	}
	cfg := apihook.Config{Format: eventrules.FormatUnyo} // what an action plugin gets
	if job.Hook != nil {
		cfg.Format = job.Hook.GetFormat()
		// Set by the pipeline for alertmanager_push only: its endsAt.
		if r := job.Hook.GetRepeatInterval(); r != "" {
			d, err := time.ParseDuration(r)
			if err != nil {
				return fmt.Errorf("the repeat_interval of action %s: %w", job.Key, err)
			}
			cfg.ResendInterval = d
		}
	}
	body, err := apihook.Body(cfg, apihook.Payload{Key: job.Key, Rule: job.Rule, Cluster: job.Cluster, Events: job.Events, Alert: alert, Status: job.Status, Since: job.Since, Level: job.Level})
	if err != nil {
		return fmt.Errorf("build the body of action %s: %w", job.Key, err)
	}
	hookMsg := job.Hook
	if hookMsg == nil {
		hookMsg = &unyov1.ApiHookAction{}
	}
	hook, err := proto.Marshal(hookMsg)
	if err != nil {
		return err
	}
	if hook == nil {
		hook = []byte{} // the column is NOT NULL
	}
	var plugin []byte // NULL for an api_hook
	if job.Plugin != nil {
		if plugin, err = proto.Marshal(job.Plugin); err != nil {
			return err
		}
		if plugin == nil {
			plugin = []byte{}
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO actions_outbox (key, rule, event_id, created_at, hook, body, plugin) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (key) DO NOTHING`, job.Key, job.Rule, job.EventID, now(), hook, body, plugin)
	if err != nil {
		return fmt.Errorf("queue action %s: %w", job.Key, err)
	}
	return nil
}

// DueActions returns queued action jobs, oldest first.
func (s *Store) DueActions(ctx context.Context, limit int) ([]store.PendingAction, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT key, rule, event_id, hook, body, plugin FROM actions_outbox ORDER BY created_at, key LIMIT $1", limit)
	if err != nil {
		return nil, fmt.Errorf("read the actions outbox: %w", err)
	}
	defer rows.Close()
	var out []store.PendingAction
	for rows.Next() {
		var p store.PendingAction
		var hook, plugin []byte
		if err := rows.Scan(&p.Key, &p.Rule, &p.EventID, &hook, &p.Body, &plugin); err != nil {
			return nil, fmt.Errorf("read the actions outbox: %w", err)
		}
		p.Hook = new(unyov1.ApiHookAction)
		if err := proto.Unmarshal(hook, p.Hook); err != nil {
			return nil, fmt.Errorf("decode the api_hook of action %s: %w", p.Key, err)
		}
		if plugin != nil {
			p.Plugin = new(unyov1.PluginAction)
			if err := proto.Unmarshal(plugin, p.Plugin); err != nil {
				return nil, fmt.Errorf("decode the plugin of action %s: %w", p.Key, err)
			}
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// FinishAction removes a finished (or given up) job and records the
// outcome in its event's explanation.
func (s *Store) FinishAction(ctx context.Context, key string, step *unyov1.ExplanationStep) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var eventID string
		err := tx.QueryRowContext(ctx, "DELETE FROM actions_outbox WHERE key = $1 RETURNING event_id", key).Scan(&eventID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // finished already (by a replica that had the lease before)
		}
		if err != nil {
			return fmt.Errorf("finish action %s: %w", key, err)
		}
		if step == nil {
			return nil
		}
		return s.writeExplanations(ctx, s.stmts(tx), []store.Explained{{ID: eventID, Explanation: &unyov1.Explanation{Steps: []*unyov1.ExplanationStep{step}}, Append: true, KeepOutcome: true}})
	})
}
