package controllers

import (
	"context"
	"time"

	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// ActivityStore is what the reconcile's steps ask of an activity's
// PostgreSQL and Redis: control.Store answers it (through pgStore); a
// table test answers it without servers.
type ActivityStore interface {
	Provision(ctx context.Context, activity int64, sku control.SKU, generation int64) (control.Provisioned, error)
	SetWindow(ctx context.Context, activity int64, skus []control.SKU, st control.Settings) error
	SetCompensationPaused(ctx context.Context, activity int64, paused bool, reason string) (bool, error)
	Counts(ctx context.Context, activity int64, skus []control.SKU, now time.Time) ([]control.SKUCounts, control.Backlog, error)
	ReadConsumers(ctx context.Context, activity int64, fresh time.Duration) (control.Consumers, error)
	DBCommits(ctx context.Context) (int64, error)
	Archive(ctx context.Context, activity int64, skus []control.SKU, retention time.Duration) (int, error)
	LastRun(ctx context.Context, activity int64) (*control.Run, error)
	RunsSince(ctx context.Context, activity int64, after time.Time) ([]control.RunFindings, error)
	// EnsureRole creates or updates an activity's PostgreSQL role.
	EnsureRole(ctx context.Context, name, role, password string) error
	// DropRole removes one.
	DropRole(ctx context.Context, name string) error
}

// pgStore is the real ActivityStore: the control store, and the roles on
// its PostgreSQL.
type pgStore struct{ *control.Store }

func (s pgStore) EnsureRole(ctx context.Context, name, role, password string) error {
	return pgroles.Ensure(ctx, s.Pool, name, role, password)
}

func (s pgStore) DropRole(ctx context.Context, name string) error {
	return pgroles.Drop(ctx, s.Pool, name)
}
