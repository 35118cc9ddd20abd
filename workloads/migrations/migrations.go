// Package migrations holds the PostgreSQL schema as versioned SQL files,
// embedded in the binaries and applied with goose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// FS is the embedded migration directory.
func FS() fs.FS {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		panic(err) // the directory is compiled in
	}
	return sub
}

func provider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("creating migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS(), goose.WithSessionLocker(locker))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("creating migration provider: %w", err)
	}
	return p, db, nil
}

// Up applies every pending migration and returns the schema version reached.
// goose takes a PostgreSQL advisory lock, so concurrent callers are safe.
func Up(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	p, db, err := provider(pool)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("applying migrations: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}

// Latest is the newest version among the embedded migrations.
func Latest() (int64, error) {
	sources, err := fs.Glob(FS(), "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, s := range sources {
		var v int64
		if _, err := fmt.Sscanf(s, "%05d_", &v); err != nil {
			return 0, fmt.Errorf("migration file %q has no version prefix: %w", s, err)
		}
		if v > latest {
			latest = v
		}
	}
	return latest, nil
}
