// Package ids derives the stable business ids of design.md#ids.
//
// reservation_id and message_id are pure functions of the request: a retry,
// a resend by the scanner or a recomputation after Redis lost its mapping all
// yield the same id, so the consumer inbox recognises the duplicate. Each id
// is HMAC-SHA256 over the identifying fields, truncated to 128 bits and laid
// out as an RFC 9562 version-8 UUID. The key version is carried in the id
// (its first byte), so a key rotation never changes an id that already
// exists: callers re-derive with the key version the id itself names.
//
// Ids meant to be random (order_id, task ids, event ids of new events) are
// UUIDv7, ordered by time.
package ids

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"

	"github.com/google/uuid"
)

// EventOrderCreateRequested is the event type that message ids of the
// order-create topic are derived for.
const EventOrderCreateRequested = "ORDER_CREATE_REQUESTED"

// Keyring holds every HMAC key version ever used. The current version signs
// new ids; older versions stay so that existing ids can be re-derived.
type Keyring struct {
	current byte
	keys    map[byte][]byte
	// macs keeps HMAC states per key version for reuse: a derivation is on
	// the gateway's path of every request.
	macs map[byte]*sync.Pool
}

// NewKeyring builds a keyring; current must be one of the versions in keys
// and every key must be at least 32 bytes.
func NewKeyring(current byte, keys map[byte][]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("ids: keyring has no keys")
	}
	for v, k := range keys {
		if len(k) < 32 {
			return nil, fmt.Errorf("ids: key version %d is %d bytes, want at least 32", v, len(k))
		}
	}
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("ids: current key version %d is not in the keyring", current)
	}
	cp := make(map[byte][]byte, len(keys))
	macs := make(map[byte]*sync.Pool, len(keys))
	for v, k := range keys {
		key := append([]byte(nil), k...)
		cp[v] = key
		macs[v] = &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
	}
	return &Keyring{current: current, keys: cp, macs: macs}, nil
}

// Current is the key version used for new ids.
func (k *Keyring) Current() byte { return k.current }

// ReservationKey identifies one purchase intent.
type ReservationKey struct {
	ActivityID int64
	SKUID      int64
	UserID     int64
	RequestID  uuid.UUID
}

// ReservationID derives the reservation id with the current key.
func (k *Keyring) ReservationID(r ReservationKey) uuid.UUID {
	id, _ := k.ReservationIDWith(k.current, r)
	return id
}

// ReservationIDWith derives the reservation id with a given key version.
func (k *Keyring) ReservationIDWith(version byte, r ReservationKey) (uuid.UUID, error) {
	return k.derive(version, "reservation",
		strconv.FormatInt(r.ActivityID, 10), strconv.FormatInt(r.SKUID, 10),
		strconv.FormatInt(r.UserID, 10), r.RequestID.String())
}

// MessageID derives the order-create message id of a reservation. The key
// version is the reservation id's own, so a reservation keeps its message id
// across rotations.
func (k *Keyring) MessageID(reservationID uuid.UUID, schemaVersion int) (uuid.UUID, error) {
	return k.EventID(reservationID, EventOrderCreateRequested, schemaVersion)
}

// EventID derives the id of an event about an aggregate that has a stable id
// (for example ORDER_CREATED for a reservation), so that re-running the step
// that emits it yields the same event id.
func (k *Keyring) EventID(aggregate uuid.UUID, eventType string, schemaVersion int) (uuid.UUID, error) {
	v, err := KeyVersion(aggregate)
	if err != nil {
		return uuid.Nil, err
	}
	return k.derive(v, "event", eventType, aggregate.String(), strconv.Itoa(schemaVersion))
}

// KeyVersion returns the key version carried by a derived id.
func KeyVersion(id uuid.UUID) (byte, error) {
	if id.Version() != 8 {
		return 0, fmt.Errorf("ids: %s is version %d, not a derived (version 8) id", id, id.Version())
	}
	return id[0], nil
}

func (k *Keyring) derive(version byte, domain string, fields ...string) (uuid.UUID, error) {
	pool, ok := k.macs[version]
	if !ok {
		return uuid.Nil, fmt.Errorf("ids: unknown key version %d", version)
	}
	mac := pool.Get().(hash.Hash)
	defer pool.Put(mac)
	mac.Reset()
	// Length-prefixed fields: "1|23" and "12|3" can never collide.
	var buf [256]byte
	msg := appendField(buf[:0], domain)
	for _, f := range fields {
		msg = appendField(msg, f)
	}
	mac.Write(msg)
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	var id uuid.UUID
	copy(id[:], sum[:16])
	id[0] = version
	id[6] = (id[6] & 0x0f) | 0x80 // version 8
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 9562 variant
	return id, nil
}

func appendField(b []byte, f string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(f))) //nolint:gosec // a field is far below 4 GiB
	return append(b, f...)
}

// NewRandom returns a UUIDv7 for ids that are meant to be random.
func NewRandom() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
