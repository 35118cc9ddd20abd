package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/states"
)

// Result is a script's {code, reason}: code > 0 is success (1 = this call
// changed state, 2 and above = idempotent or informational), code < 0 a refusal
// named by Reason.
type Result struct {
	Code   int64
	Reason string
}

// OK reports whether the script succeeded (changed state or was idempotent).
func (r Result) OK() bool { return r.Code > 0 }

// Store runs the Lua scripts against a single Redis, Sentinel or Cluster.
type Store struct {
	c redis.UniversalClient
}

// New wraps a go-redis client.
func New(c redis.UniversalClient) *Store { return &Store{c: c} }

// Client is the underlying client.
func (s *Store) Client() redis.UniversalClient { return s.c }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func parse(v any, err error, min int) ([]any, error) {
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < min {
		return nil, fmt.Errorf("unexpected script reply %#v", v)
	}
	return arr, nil
}

func result(v any, err error) (Result, []any, error) {
	arr, err := parse(v, err, 2)
	if err != nil {
		return Result{}, nil, err
	}
	code, ok1 := arr[0].(int64)
	reason, ok2 := arr[1].(string)
	if !ok1 || !ok2 {
		return Result{}, nil, fmt.Errorf("unexpected script reply %#v", v)
	}
	return Result{Code: code, Reason: reason}, arr, nil
}

// ReserveRequest is everything the reserve script records; the ids are the
// stable ones of package ids.
type ReserveRequest struct {
	Slot             Slot
	ReservationID    uuid.UUID
	MessageID        uuid.UUID
	RequestID        uuid.UUID
	UserID           int64
	Now              time.Time
	BusinessDeadline time.Time
	// SendDue is when the send-scanner first looks at the entry; the
	// gateway's own immediate send acks it before then.
	SendDue       time.Time
	RequestTTL    time.Duration
	SchemaVersion int
	KeyVersion    byte
	// TraceID and SpanID are the reserve span's (design.md#traces), kept
	// with the reservation for the scanner's resend; "" when not traced.
	TraceID string
	SpanID  string
	// UserLimit is how many requests the user may send per UserWindow,
	// counted in Redis across every gateway (0: no limit).
	UserLimit  int
	UserWindow time.Duration
}

// ReserveResult is the reserve script's answer.
type ReserveResult struct {
	Result
	// ReservationID is the new reservation, the replayed one, or the one the
	// user already holds.
	ReservationID string
	// Status is the reservation's status for a replay of the same id.
	Status string
}

// Reserve codes.
const (
	ReserveOK               = 1
	ReserveReplayed         = 2
	ReserveSoldOut          = -1
	ReserveAlreadyPurchased = -2
	ReserveWindowClosed     = -3
	ReserveNotProvisioned   = -4
	ReserveRateLimited      = -5
)

// Reserve runs reserve.lua.
func (s *Store) Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error) {
	keys, args := reserveArgs(r)
	return reserveResult(scriptReserve.Run(ctx, s.c, keys, args...).Result())
}

func reserveArgs(r ReserveRequest) (keys []string, args []any) {
	sl := r.Slot
	keys = []string{sl.Window(), sl.Stock(), sl.Counter(), sl.Request(r.UserID, r.RequestID),
		sl.User(r.UserID), sl.Reservation(r.ReservationID), sl.SendDue(), sl.Open(), sl.Rate(r.UserID)}
	args = []any{r.ReservationID.String(), r.MessageID.String(), r.RequestID.String(),
		sl.ActivityID, sl.SKUID, r.UserID, sl.Bucket,
		ms(r.Now), ms(r.BusinessDeadline), ms(r.SendDue), r.RequestTTL.Milliseconds(),
		r.SchemaVersion, int(r.KeyVersion), r.TraceID, max(0, r.UserLimit), max(1, r.UserWindow.Milliseconds()), r.SpanID}
	return keys, args
}

func reserveResult(v any, err error) (ReserveResult, error) {
	res, arr, err := result(v, err)
	if err != nil {
		return ReserveResult{}, fmt.Errorf("running reserve script: %w", err)
	}
	out := ReserveResult{Result: res}
	if len(arr) >= 4 {
		out.ReservationID, _ = arr[2].(string)
		out.Status, _ = arr[3].(string)
	}
	return out, nil
}

// Compensate codes (design.md#compensation).
const (
	CompensateApplied       = 1
	CompensateAlready       = 2
	CompensateMissing       = -1
	CompensateIDMismatch    = -2
	CompensateOrderExists   = -3
	CompensateInvalidStatus = -4
	CompensateIDConflict    = -5
)

// Compensate runs compensate.lua.
func (s *Store) Compensate(ctx context.Context, sl Slot, reservationID uuid.UUID, compensationID string, now time.Time, terminalTTL time.Duration) (Result, error) {
	keys := []string{sl.Reservation(reservationID), sl.Stock(), sl.Compensation(reservationID), sl.Counter(), sl.SendDue(), sl.Open()}
	v, err := scriptCompensate.Run(ctx, s.c, keys, reservationID.String(), compensationID, ms(now), terminalTTL.Milliseconds()).Result()
	res, _, err := result(v, err)
	if err != nil {
		return Result{}, fmt.Errorf("running compensate script: %w", err)
	}
	return res, nil
}

// Rebuild is what rebuild_projection.lua writes: PostgreSQL's facts of an
// order whose Redis reservation hash is gone.
type Rebuild struct {
	ReservationID, MessageID, RequestID, OrderID uuid.UUID
	UserID                                       int64
	ReservedAt, BusinessDeadline                 time.Time
}

// RebuildProjection runs rebuild_projection.lua (counters and stock untouched).
func (s *Store) RebuildProjection(ctx context.Context, sl Slot, r Rebuild, now time.Time) (Result, error) {
	keys := []string{sl.Reservation(r.ReservationID), sl.User(r.UserID), sl.SendDue(), sl.Open()}
	v, err := scriptRebuildProjection.Run(ctx, s.c, keys, r.ReservationID.String(), r.MessageID.String(), r.RequestID.String(),
		sl.ActivityID, sl.SKUID, r.UserID, sl.Bucket, r.OrderID.String(), ms(now), ms(r.ReservedAt), ms(r.BusinessDeadline)).Result()
	res, _, err := result(v, err)
	if err != nil {
		return Result{}, fmt.Errorf("running rebuild-projection script: %w", err)
	}
	return res, nil
}

// Claim is one send_due entry leased to the caller; Lease is its proof of
// ownership for AckSend and RescheduleSend.
type Claim struct {
	ReservationID uuid.UUID
	Lease         int64
}

// ClaimDue leases up to limit due entries until now+lease.
func (s *Store) ClaimDue(ctx context.Context, sl Slot, now time.Time, lease time.Duration, limit int) ([]Claim, error) {
	if lease <= 0 || limit <= 0 {
		return nil, errors.New("claiming send_due: lease and limit must be positive")
	}
	until := now.Add(lease).UnixMilli()
	v, err := scriptSendClaim.Run(ctx, s.c, []string{sl.SendDue()}, ms(now), until, limit).Result()
	if err != nil {
		return nil, fmt.Errorf("running send-claim script: %w", err)
	}
	arr, _ := v.([]any)
	out := make([]Claim, 0, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		idStr, _ := arr[i].(string)
		id, err := uuid.Parse(idStr)
		if err != nil {
			return nil, fmt.Errorf("send_due holds a bad reservation id %q: %w", idStr, err)
		}
		out = append(out, Claim{ReservationID: id, Lease: until})
	}
	return out, nil
}

// AckSend records a successful send (send_ack.lua). resendAfter > 0 keeps
// the entry to verify the delivery: due again then (doubling with each
// send), unless the reservation's projection removed it; 0 removes it.
func (s *Store) AckSend(ctx context.Context, sl Slot, reservationID uuid.UUID, owned int64, now time.Time, resendAfter time.Duration) (Result, error) {
	keys, args := sendAckArgs(SendAck{Slot: sl, ReservationID: reservationID, Owned: owned, Now: now, ResendAfter: resendAfter})
	return sendAckResult(scriptSendAck.Run(ctx, s.c, keys, args...).Result())
}

func sendAckArgs(a SendAck) (keys []string, args []any) {
	return []string{a.Slot.SendDue(), a.Slot.Reservation(a.ReservationID)},
		[]any{a.ReservationID.String(), a.Owned, ms(a.Now), a.ResendAfter.Milliseconds()}
}

func sendAckResult(v any, err error) (Result, error) {
	res, _, err := result(v, err)
	if err != nil {
		return Result{}, fmt.Errorf("running send-ack script: %w", err)
	}
	return res, nil
}

// MQ states of a reservation (design.md#states).
const (
	MQPending   = string(states.SendPending)
	MQUnknown   = string(states.SendUnknown)
	MQPublished = string(states.SendPublished)
)

// RescheduleSend keeps a failed or unknown send due again at next (send_reschedule.lua).
func (s *Store) RescheduleSend(ctx context.Context, sl Slot, reservationID uuid.UUID, owned int64, next time.Time, mqState, lastError string) (Result, error) {
	v, err := scriptSendReschedule.Run(ctx, s.c, []string{sl.SendDue(), sl.Reservation(reservationID)},
		reservationID.String(), owned, ms(next), mqState, lastError).Result()
	res, _, err := result(v, err)
	if err != nil {
		return Result{}, fmt.Errorf("running send-reschedule script: %w", err)
	}
	return res, nil
}

// Provision sets a slot's stock to target once per generation (provision.lua)
// and returns the slot's initial stock afterwards.
func (s *Store) Provision(ctx context.Context, sl Slot, target, generation int64) (Result, int64, error) {
	v, err := scriptProvision.Run(ctx, s.c, []string{sl.Stock(), sl.Counter()}, target, generation).Result()
	res, arr, err := result(v, err)
	if err != nil {
		return Result{}, 0, fmt.Errorf("running provision script: %w", err)
	}
	initial, _ := arr[2].(int64)
	return res, initial, nil
}

// Window states of an activity.
const (
	WindowNotStarted = "NOT_STARTED"
	WindowActive     = "ACTIVE"
	WindowPaused     = "PAUSED"
	WindowEnded      = "ENDED"
)

// ValidWindow reports whether state is one of the window flags.
func ValidWindow(state string) bool {
	switch state {
	case WindowNotStarted, WindowActive, WindowPaused, WindowEnded:
		return true
	}
	return false
}

// SetWindow sets a slot's window flag.
func (s *Store) SetWindow(ctx context.Context, sl Slot, state string) error {
	if !ValidWindow(state) {
		return fmt.Errorf("setting window: unknown state %q", state)
	}
	if err := s.c.Set(ctx, sl.Window(), state, 0).Err(); err != nil {
		return fmt.Errorf("setting window of %s: %w", sl.Tag(), err)
	}
	return nil
}

// Window reads a slot's window flag ("" when it was never set).
func (s *Store) Window(ctx context.Context, sl Slot) (string, error) {
	v, err := s.c.Get(ctx, sl.Window()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the window of %s: %w", sl.Tag(), err)
	}
	return v, nil
}

// Counters are a slot's conservation counters (design.md#invariants), with the stock
// moved between the buckets of a SKU (move_out.lua).
type Counters struct {
	Initial      int64 `json:"initial"`
	Available    int64 `json:"available"`
	OpenReserved int64 `json:"open_reserved"`
	Committed    int64 `json:"committed"`
	MovedIn      int64 `json:"moved_in"`
	MovedOut     int64 `json:"moved_out"`
	Exists       bool  `json:"exists"`
}

// Delta is initial + moved_in - moved_out - available - open_reserved -
// committed: zero when a bucket conserves stock. Summed over a SKU's
// buckets it is minus the units in transit (InTransit).
func (c Counters) Delta() int64 {
	return c.Initial + c.MovedIn - c.MovedOut - c.Available - c.OpenReserved - c.Committed
}

// InTransit is moved_out - moved_in: over all the buckets of a SKU, the units
// taken out of one bucket and not yet added to another (zero once every
// move is settled).
func (c Counters) InTransit() int64 { return c.MovedOut - c.MovedIn }

// Add sums counters (over the buckets of a SKU).
func (c Counters) Add(o Counters) Counters {
	return Counters{Initial: c.Initial + o.Initial, Available: c.Available + o.Available,
		OpenReserved: c.OpenReserved + o.OpenReserved, Committed: c.Committed + o.Committed,
		MovedIn: c.MovedIn + o.MovedIn, MovedOut: c.MovedOut + o.MovedOut, Exists: c.Exists || o.Exists}
}

// ReadCounters reads a slot's counters and stock in one round trip (same slot).
func (s *Store) ReadCounters(ctx context.Context, sl Slot) (Counters, error) {
	cs, err := s.ReadCountersOf(ctx, []Slot{sl})
	if err != nil {
		return Counters{}, err
	}
	return cs[0], nil
}

// ReadCountersOf reads the counters and stock of each slot, each slot's two
// reads in one transaction (a consistent view of that slot). On one Redis
// server every slot is read in one transaction, one round trip; a cluster
// refuses a transaction over several slots, so there each slot is its own.
func (s *Store) ReadCountersOf(ctx context.Context, slots []Slot) ([]Counters, error) {
	if _, cluster := s.c.(*redis.ClusterClient); cluster && len(slots) > 1 {
		out := make([]Counters, len(slots))
		for i, sl := range slots {
			cs, err := s.ReadCountersOf(ctx, []Slot{sl})
			if err != nil {
				return nil, err
			}
			out[i] = cs[0]
		}
		return out, nil
	}
	pipe := s.c.TxPipeline()
	hs := make([]*redis.MapStringStringCmd, len(slots))
	sts := make([]*redis.StringCmd, len(slots))
	for i, sl := range slots {
		hs[i] = pipe.HGetAll(ctx, sl.Counter())
		sts[i] = pipe.Get(ctx, sl.Stock())
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading counters of %d slots from %s: %w", len(slots), slots[0].Tag(), err)
	}
	out := make([]Counters, len(slots))
	for i, sl := range slots {
		m := hs[i].Val()
		c := Counters{Exists: len(m) > 0}
		var err error
		for _, f := range []struct {
			name, v string
			to      *int64
		}{{"initial", m["initial"], &c.Initial}, {"open_reserved", m["open_reserved"], &c.OpenReserved}, {"committed", m["committed"], &c.Committed},
			{"moved_in", m["moved_in"], &c.MovedIn}, {"moved_out", m["moved_out"], &c.MovedOut}, {"stock", sts[i].Val(), &c.Available}} {
			if *f.to, err = counterValue(f.v); err != nil {
				return nil, fmt.Errorf("reading the counters of %s: %s: %w", sl.Tag(), f.name, err)
			}
		}
		out[i] = c
	}
	return out, nil
}

// counterValue parses a counter as Redis holds it: absent ("") is 0;
// anything but an integer is an error, never read as 0 (the invariant
// checker and the operator's deltas read these).
func counterValue(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// Hash is a reservation hash as read: its fields by name.
type Hash map[string]string

// Status is the hash's state (states.RedisHash); "" for no hash.
func (h Hash) Status() states.HashStatus { return states.HashStatus(h["status"]) }

// Reservation reads a reservation hash (nil when it does not exist).
func (s *Store) Reservation(ctx context.Context, sl Slot, id uuid.UUID) (Hash, error) {
	m, err := s.c.HGetAll(ctx, sl.Reservation(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("reading reservation %s: %w", id, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// SendBacklog counts the send_due entries that are due over slots — a
// first send overdue, a resend after a failure, or a sent reservation still
// undecided past its verification bound — and how far the most overdue one
// is past its due time (design.md#metrics reservation_send_pending /
// reservation_send_oldest_age_seconds). Entries not yet due (the gateway's
// own send window, a verification still to come) are not counted.
func (s *Store) SendBacklog(ctx context.Context, slots []Slot, now time.Time) (int64, time.Duration, error) {
	return s.zsetBacklog(ctx, slots, Slot.SendDue, now, strconv.FormatInt(now.UnixMilli(), 10))
}

// Backlog counts the reservations PostgreSQL has not decided yet over slots
// and the age of the oldest (the order-create backlog, design.md#backlog).
func (s *Store) Backlog(ctx context.Context, slots []Slot, now time.Time) (int64, time.Duration, error) {
	return s.zsetBacklog(ctx, slots, Slot.Open, now, "+inf")
}

// zsetBacklog sums the members of a per-slot ZSET scored by Unix ms up to
// maxScore and returns the age of its lowest score.
func (s *Store) zsetBacklog(ctx context.Context, slots []Slot, key func(Slot) string, now time.Time, maxScore string) (int64, time.Duration, error) {
	var n int64
	var oldest time.Duration
	for _, sl := range slots {
		k := key(sl)
		c, err := s.c.ZCount(ctx, k, "-inf", maxScore).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("counting %s: %w", k, err)
		}
		n += c
		if c == 0 {
			continue
		}
		first, err := s.c.ZRangeWithScores(ctx, k, 0, 0).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("reading %s: %w", k, err)
		}
		if len(first) == 1 {
			if age := now.Sub(time.UnixMilli(int64(first[0].Score))); age > oldest {
				oldest = age
			}
		}
	}
	return n, oldest, nil
}

// Recount codes.
const (
	RecountApplied        = 1
	RecountUnchanged      = 2
	RecountNotProvisioned = -1
	RecountOversubscribed = -2
)

// RecountResult is recount.lua's answer: the bucket's counters before and after.
type RecountResult struct {
	Result
	Before, After Counters
}

// Recount runs recount.lua: the bucket's counters are set from PostgreSQL's
// committed units and the reservations Redis still holds open (design.md#runbook:
// an activity-level calibration, never one INCR per missing key).
func (s *Store) Recount(ctx context.Context, sl Slot, committed int64, now time.Time) (RecountResult, error) {
	keys := []string{sl.Stock(), sl.Counter(), sl.Open()}
	v, err := scriptRecount.Run(ctx, s.c, keys, committed, ms(now)).Result()
	res, arr, err := result(v, err)
	if err != nil {
		return RecountResult{}, fmt.Errorf("running recount script on %s: %w", sl.Tag(), err)
	}
	if len(arr) < 11 {
		return RecountResult{}, fmt.Errorf("unexpected recount reply %#v", v)
	}
	n := make([]int64, 9)
	for i := range n {
		x, ok := arr[i+2].(int64)
		if !ok {
			return RecountResult{}, fmt.Errorf("unexpected recount reply %#v", v)
		}
		n[i] = x
	}
	exists := res.Code != RecountNotProvisioned
	return RecountResult{Result: res,
		Before: Counters{Initial: n[6], MovedIn: n[7], MovedOut: n[8], Available: n[0], OpenReserved: n[1], Committed: n[2], Exists: exists},
		After:  Counters{Initial: n[6], MovedIn: n[7], MovedOut: n[8], Available: n[3], OpenReserved: n[4], Committed: n[5], Exists: exists}}, nil
}
