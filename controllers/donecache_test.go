package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestDoneCache(t *testing.T) {
	var c doneCache
	t0 := time.Unix(1_800_000_000, 0)
	a, b := types.UID("a"), types.UID("b")
	require.False(t, c.fresh(a, "s", "x", t0, 0), "nothing done yet")
	c.done(a, "s", "x", t0)
	c.done(b, "s", "x", t0)
	for _, tc := range []struct {
		name   string
		inputs string
		at     time.Time
		within time.Duration
		fresh  bool
	}{
		{"same inputs, no expiry", "x", t0.Add(time.Hour), 0, true},
		{"same inputs, within", "x", t0.Add(time.Minute), 10 * time.Minute, true},
		{"same inputs, too old", "x", t0.Add(10 * time.Minute), 10 * time.Minute, false},
		{"other inputs", "y", t0, 0, false},
	} {
		require.Equal(t, tc.fresh, c.fresh(a, "s", tc.inputs, tc.at, tc.within), tc.name)
	}
	c.done(a, "s", "y", t0) // new inputs replace the old: one entry per step
	require.False(t, c.fresh(a, "s", "x", t0, 0))
	require.True(t, c.fresh(a, "s", "y", t0, 0))
	c.drop(a, "s")
	require.False(t, c.fresh(a, "s", "y", t0, 0))
	c.forget(a)
	require.False(t, c.known(a))
	require.True(t, c.known(b), "another activity's steps stay")
}
