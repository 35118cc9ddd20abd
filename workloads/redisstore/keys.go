// Package redisstore is the Redis side of the flash sale: the key layout of
// design.md#redis-keys and the Lua scripts that change it atomically.
package redisstore

import (
	"encoding/hex"
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
	var buf [64]byte
	return string(s.appendTag(buf[:0]))
}

func (s Slot) appendTag(b []byte) []byte {
	b = append(b, '{')
	b = strconv.AppendInt(b, s.ActivityID, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, s.SKUID, 10)
	if s.Bucket >= 0 {
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(s.Bucket), 10)
	}
	return append(b, '}')
}

func (s Slot) key(part string) string { return s.keyOf(part, 0, false, nil) }

// keyOf is a key named by the slot, a kind and an identifier (a number, a
// UUID, or both), built in one buffer: the gateway builds several for every
// reservation.
func (s Slot) keyOf(kind string, n int64, withN bool, u *uuid.UUID) string {
	var buf [160]byte
	b := append(buf[:0], "seckill:"...)
	b = append(s.appendTag(b), ':')
	b = append(b, kind...)
	if withN {
		b = strconv.AppendInt(append(b, ':'), n, 10)
	}
	if u != nil {
		b = appendUUID(append(b, ':'), *u)
	}
	return string(b)
}

// appendUUID appends u in its canonical form (uuid.UUID.String's).
func appendUUID(b []byte, u uuid.UUID) []byte {
	var d [36]byte
	hex.Encode(d[0:8], u[0:4])
	d[8] = '-'
	hex.Encode(d[9:13], u[4:6])
	d[13] = '-'
	hex.Encode(d[14:18], u[6:8])
	d[18] = '-'
	hex.Encode(d[19:23], u[8:10])
	d[23] = '-'
	hex.Encode(d[24:], u[10:])
	return append(b, d[:]...)
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
func (s Slot) Reservation(id uuid.UUID) string { return s.keyOf("reservation", 0, false, &id) }

// Request maps a user's request id to its reservation.
func (s Slot) Request(userID int64, requestID uuid.UUID) string {
	return s.keyOf("request", userID, true, &requestID)
}

// User is the one-reservation-per-user mark.
func (s Slot) User(userID int64) string { return s.keyOf("user", userID, true, nil) }

// Rate counts the user's reservation requests in the current window (the
// per-user limit every gateway replica shares).
func (s Slot) Rate(userID int64) string { return s.keyOf("rate", userID, true, nil) }

// Compensation is the compensation idempotency marker of a reservation.
func (s Slot) Compensation(reservationID uuid.UUID) string {
	return s.keyOf("comp", 0, false, &reservationID)
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
