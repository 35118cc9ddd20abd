package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// guardWatch follows the backlog guard's flag in activity_control (every
// 200 ms) and counts its pauses.
type guardWatch struct {
	paused, seenPauses atomic.Int64
	once               sync.Once
	done               chan struct{}
}

func (g *guardWatch) watch(ctx context.Context, pool *pgxpool.Pool, activity int64) {
	g.once.Do(func() { g.done = make(chan struct{}) })
	for {
		var p bool
		err := pool.QueryRow(ctx, `SELECT coalesce((SELECT compensation_paused FROM activity_control WHERE activity_id = $1), false)`, activity).Scan(&p)
		switch {
		case err != nil && ctx.Err() == nil:
			fmt.Fprintf(os.Stderr, "chaos: reading the backlog guard's flag: %v\n", err)
		case err == nil && p && g.paused.Swap(1) == 0:
			g.seenPauses.Add(1)
		case err == nil && !p:
			g.paused.Store(0)
		}
		select {
		case <-ctx.Done():
			return
		case <-g.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pausedNow: the flag was set at the last read.
func (g *guardWatch) pausedNow() bool { return g.paused.Load() == 1 }

// pauses counts the times the flag was seen going up.
func (g *guardWatch) pauses() int64 { return g.seenPauses.Load() }

func (g *guardWatch) stop() {
	g.once.Do(func() { g.done = make(chan struct{}) })
	close(g.done)
}
