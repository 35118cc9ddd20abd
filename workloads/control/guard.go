package control

import (
	"context"
	"fmt"
	"time"
)

// DefaultPauseAfter is the backlog guard's threshold when the manifest sets
// none (spec.scaling.compensationPauseAfter).
const DefaultPauseAfter = 2 * time.Minute

// GuardDecision is the backlog guard of design.md#backlog: while the oldest
// undecided reservation is older than threshold, time-driven compensation
// pauses (the flag in activity_control that deadline rejections obey); once
// paused it resumes only when the backlog is younger than half the
// threshold (hysteresis, so that a backlog hovering at the threshold does
// not flap). The operator and `seckill activity guard` both decide with it.
func GuardDecision(b Backlog, threshold time.Duration, wasPaused bool) (pause bool, reason string) {
	pause = b.OldestAge > threshold || (wasPaused && b.OldestAge > threshold/2)
	return pause, fmt.Sprintf("oldest undecided reservation %s old (threshold %s), %d open", b.OldestAge.Round(time.Second), threshold, b.Open)
}

// Guard is one pass of the backlog guard without Kubernetes: it reads the
// backlog and the flag, decides, and sets the flag (changed: it moved).
func (s *Store) Guard(ctx context.Context, activity int64, skus []SKU, threshold time.Duration, now time.Time) (pause, changed bool, reason string, err error) {
	_, b, err := s.Counts(ctx, activity, skus, now)
	if err != nil {
		return false, false, "", fmt.Errorf("backlog guard: %w", err)
	}
	was, err := s.CompensationPaused(ctx, activity)
	if err != nil {
		return false, false, "", fmt.Errorf("backlog guard: %w", err)
	}
	pause, reason = GuardDecision(b, threshold, was)
	if _, err := s.SetCompensationPaused(ctx, activity, pause, reason); err != nil {
		return false, false, "", fmt.Errorf("backlog guard: %w", err)
	}
	return pause, pause != was, reason, nil
}
