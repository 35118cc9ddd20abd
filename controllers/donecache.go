package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// doneCache remembers, per activity, when an idempotent step (topics and
// groups created, the ACL login checked, a PostgreSQL role ensured) last
// succeeded and with which inputs, so that a reconcile does not repeat it.
// A step is one entry, replaced when its inputs change; forget drops an
// activity's entries when it is gone, so the cache holds only live
// activities.
type doneCache struct {
	mu sync.Mutex
	m  map[types.UID]map[string]doneEntry
}

type doneEntry struct {
	inputs string
	at     time.Time
}

// fresh: step succeeded for uid with these inputs, and (within > 0) less
// than within ago.
func (c *doneCache) fresh(uid types.UID, step, inputs string, now time.Time, within time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[uid][step]
	return ok && e.inputs == inputs && (within <= 0 || now.Sub(e.at) < within)
}

// done records that step succeeded for uid with these inputs at now.
func (c *doneCache) done(uid types.UID, step, inputs string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.UID]map[string]doneEntry{}
	}
	if c.m[uid] == nil {
		c.m[uid] = map[string]doneEntry{}
	}
	c.m[uid][step] = doneEntry{inputs: inputs, at: now}
}

// drop forgets one step of uid (its effect was undone).
func (c *doneCache) drop(uid types.UID, step string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m[uid], step)
}

// forget drops every step of uid.
func (c *doneCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uid)
}

// known: uid has entries.
func (c *doneCache) known(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[uid]
	return ok
}

// stepInputs digests what a step's outcome depends on (its doneCache
// inputs): the parts joined by NUL, so secrets are never kept in memory.
func stepInputs(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}
