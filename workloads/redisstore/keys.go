// Package redisstore is the Redis side of the flash sale: the key layout of
// seed §8.2 and the Lua scripts that change it atomically.
package redisstore

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// Slot names the hash-tagged group of keys that one script touches: one
// (activity, sku) or one stock bucket of it. Every key of a Slot lands in the
// same Redis Cluster hash slot.
type Slot struct {
	ActivityID int64
	SKUID      int64
	// Bucket is the stock bucket, or -1 when the SKU is not bucketed.
	Bucket int
}

// SKUSlot is the slot of an unbucketed SKU.
func SKUSlot(activityID, skuID int64) Slot {
	return Slot{ActivityID: activityID, SKUID: skuID, Bucket: -1}
}

// BucketSlot is the slot of one stock bucket of a SKU.
func BucketSlot(activityID, skuID int64, bucket int) Slot {
	return Slot{ActivityID: activityID, SKUID: skuID, Bucket: bucket}
}

// Slots lists the slots of a SKU with n buckets (n <= 1: the unbucketed slot).
func Slots(activityID, skuID int64, n int) []Slot {
	if n <= 1 {
		return []Slot{SKUSlot(activityID, skuID)}
	}
	s := make([]Slot, n)
	for i := range s {
		s[i] = BucketSlot(activityID, skuID, i)
	}
	return s
}

// Tag is the hash tag: {a:s} or {a:s:b}.
func (s Slot) Tag() string {
	if s.Bucket < 0 {
		return "{" + strconv.FormatInt(s.ActivityID, 10) + ":" + strconv.FormatInt(s.SKUID, 10) + "}"
	}
	return fmt.Sprintf("{%d:%d:%d}", s.ActivityID, s.SKUID, s.Bucket)
}

func (s Slot) key(parts ...string) string {
	k := "seckill:" + s.Tag()
	for _, p := range parts {
		k += ":" + p
	}
	return k
}

// Window is the activity window flag the reserve script checks first.
func (s Slot) Window() string { return s.key("window") }

// Stock is the Redis available stock.
func (s Slot) Stock() string { return s.key("stock") }

// Counter is the conservation counters hash (initial, open_reserved,
// committed, moved_in, moved_out).
func (s Slot) Counter() string { return s.key("counter") }

// MovesOut is the hash of the stock moves this bucket sent that its
// destination may not have applied yet (move_id -> "dst:amount:at_ms").
func (s Slot) MovesOut() string { return s.key("moves_out") }

// MovesIn is the hash of the stock moves this bucket applied (move_id -> amount).
func (s Slot) MovesIn() string { return s.key("moves_in") }

// SendDue is the ZSET of reservations waiting to be sent, scored by the next attempt.
func (s Slot) SendDue() string { return s.key("send_due") }

// Open is the ZSET of reservations PostgreSQL has not decided yet (created,
// not yet projected as an order nor compensated), scored by reserved_at: the
// order-create backlog the operator scales and guards on.
func (s Slot) Open() string { return s.key("open") }

// Reservation is the reservation hash.
func (s Slot) Reservation(id uuid.UUID) string { return s.key("reservation", id.String()) }

// Request maps a user's request id to its reservation.
func (s Slot) Request(userID int64, requestID uuid.UUID) string {
	return s.key("request", strconv.FormatInt(userID, 10), requestID.String())
}

// User is the one-reservation-per-user mark.
func (s Slot) User(userID int64) string { return s.key("user", strconv.FormatInt(userID, 10)) }

// Rate counts the user's reservation requests in the current window (the
// per-user limit every gateway replica shares).
func (s Slot) Rate(userID int64) string { return s.key("rate", strconv.FormatInt(userID, 10)) }

// Compensation is the compensation idempotency marker of a reservation.
func (s Slot) Compensation(reservationID uuid.UUID) string {
	return s.key("comp", reservationID.String())
}

// BucketFor spreads users over n stock buckets. The user id is mixed
// (splitmix64's finaliser) so that ids with a pattern (all even, say) still
// use every bucket.
func BucketFor(userID int64, n int) int {
	if n <= 1 {
		return -1
	}
	z := uint64(userID) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(n))
}
