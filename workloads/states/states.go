// Package states holds the domain's state machines (design.md#flows,
// design.md#order-transaction): for each table with a status column, and for
// the Redis reservation hash, a typed state, its constants — for a table the
// same list as its CHECK constraint — and the transitions the stores may
// make. The SQL files and the Lua scripts are what move a row or a hash;
// every transition there is guarded by the current state, and states_test.go
// reads every SQL file and every Lua script of the workloads and refuses a
// transition these tables do not allow. Go code that decides a transition
// (the reconcile's decisions, the repair steps) names its states with these
// constants and is held to the same tables by its own tests.
package states

import (
	"fmt"
	"slices"

	"strings"
)

// Machine is one table's (or the Redis hash's) states and allowed transitions.
type Machine[S ~string] struct {
	// Table is the table, or for Redis the key's role.
	Table string
	// Initial are the states a row is inserted with.
	Initial []S
	// Next maps a state to the states it may move to.
	Next map[S][]S
}

// States lists every state, sorted.
func (m Machine[S]) States() []S {
	seen := map[S]bool{}
	for _, s := range m.Initial {
		seen[s] = true
	}
	for from, tos := range m.Next {
		seen[from] = true
		for _, to := range tos {
			seen[to] = true
		}
	}
	out := make([]S, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Allows reports whether from may move to to.
func (m Machine[S]) Allows(from, to S) bool { return slices.Contains(m.Next[from], to) }

// Check is Allows as an error, for a transition decided at run time.
func (m Machine[S]) Check(from, to S) error {
	if !m.Allows(from, to) {
		return fmt.Errorf("%s: %s → %s is not a transition of its state machine", m.Table, from, to)
	}
	return nil
}

// Known reports whether s is a state of the machine.
func (m Machine[S]) Known(s S) bool { return slices.Contains(m.States(), s) }

// Any is a machine seen without its state type (the tests and the diagrams
// go over all of them).
type Any interface {
	Name() string
	StateNames() []string
	AllowsNames(from, to string) bool
	Mermaid() string
}

// Name is the table (or the Redis key's role).
func (m Machine[S]) Name() string { return m.Table }

// StateNames is States as strings.
func (m Machine[S]) StateNames() []string {
	out := []string{}
	for _, s := range m.States() {
		out = append(out, string(s))
	}
	return out
}

// AllowsNames is Allows for states given as strings.
func (m Machine[S]) AllowsNames(from, to string) bool { return m.Allows(S(from), S(to)) }

// ReservationStatus is inventory_reservation.status.
type ReservationStatus string

// The reservation's states.
const (
	ReservationReserved      ReservationStatus = "RESERVED"
	ReservationOrderCreated  ReservationStatus = "ORDER_CREATED"
	ReservationOrderRejected ReservationStatus = "ORDER_REJECTED"
	ReservationCompensating  ReservationStatus = "COMPENSATING"
	ReservationCompensated   ReservationStatus = "COMPENSATED"
	ReservationCancelled     ReservationStatus = "CANCELLED"
	ReservationManualReview  ReservationStatus = "MANUAL_REVIEW"
)

// Reservation: inventory_reservation (design.md#send). MANUAL_REVIEW is the
// runbook's freeze (from any state) and its lifting (back to the state the
// freeze remembered).
var Reservation = Machine[ReservationStatus]{
	Table:   "inventory_reservation",
	Initial: []ReservationStatus{ReservationReserved},
	Next: map[ReservationStatus][]ReservationStatus{
		ReservationReserved:      {ReservationOrderCreated, ReservationOrderRejected, ReservationManualReview},
		ReservationOrderCreated:  {ReservationCancelled, ReservationManualReview},
		ReservationOrderRejected: {ReservationCompensating, ReservationCompensated, ReservationManualReview},
		ReservationCompensating:  {ReservationCompensated, ReservationManualReview},
		ReservationCompensated:   {ReservationManualReview},
		ReservationCancelled:     {ReservationManualReview},
		ReservationManualReview: {ReservationReserved, ReservationOrderCreated, ReservationOrderRejected,
			ReservationCompensating, ReservationCompensated, ReservationCancelled},
	},
}

// HasOrder: the reservation's order was created (it may since have been
// cancelled); such a reservation is never compensated.
func (s ReservationStatus) HasOrder() bool {
	return s == ReservationOrderCreated || s == ReservationCancelled
}

// Rejected: the order was refused and the stock goes (or went) back to Redis.
func (s ReservationStatus) Rejected() bool {
	return s == ReservationOrderRejected || s == ReservationCompensating || s == ReservationCompensated
}

// OrderStatus is orders.status.
type OrderStatus string

// The order's states.
const (
	OrderCreated       OrderStatus = "CREATED"
	OrderPaying        OrderStatus = "PAYING"
	OrderCancelPending OrderStatus = "CANCEL_PENDING"
	OrderCancelled     OrderStatus = "CANCELLED"
	OrderRefunding     OrderStatus = "REFUNDING"
	OrderRefunded      OrderStatus = "REFUNDED"
	OrderPaid          OrderStatus = "PAID"
)

// Order: orders (design.md#payment-cancel). A PAID order is never cancelled. A
// success after the cancellation is refunded (the seed's REFUNDING and
// REFUNDED of the order; this implementation tracks the refund on the
// payment_record and leaves the order CANCELLED).
var Order = Machine[OrderStatus]{
	Table:   "orders",
	Initial: []OrderStatus{OrderCreated},
	Next: map[OrderStatus][]OrderStatus{
		OrderCreated:       {OrderPaying, OrderCancelPending, OrderPaid},
		OrderPaying:        {OrderCancelPending, OrderPaid},
		OrderCancelPending: {OrderCancelled, OrderPaid},
		OrderCancelled:     {OrderRefunding},
		OrderRefunding:     {OrderRefunded},
		OrderPaid:          {},
		OrderRefunded:      {},
	},
}

// Ended: the order was cancelled (and perhaps refunded); its unit is back.
func (s OrderStatus) Ended() bool {
	return s == OrderCancelled || s == OrderRefunding || s == OrderRefunded
}

// TaskStatus is compensation_task.status.
type TaskStatus string

// The compensation task's states.
const (
	TaskPending  TaskStatus = "PENDING"
	TaskRetry    TaskStatus = "RETRY"
	TaskClaimed  TaskStatus = "CLAIMED"
	TaskManual   TaskStatus = "MANUAL"
	TaskApplied  TaskStatus = "APPLIED"
	TaskVerified TaskStatus = "VERIFIED"
)

// CompensationTask: compensation_task (design.md#compensation). CLAIMED again from
// CLAIMED is a retake after the lease expired; MANUAL is taken only by the
// runbook's standard step.
var CompensationTask = Machine[TaskStatus]{
	Table:   "compensation_task",
	Initial: []TaskStatus{TaskPending},
	Next: map[TaskStatus][]TaskStatus{
		TaskPending:  {TaskClaimed, TaskManual},
		TaskRetry:    {TaskClaimed, TaskManual},
		TaskClaimed:  {TaskClaimed, TaskApplied, TaskRetry, TaskManual},
		TaskManual:   {TaskClaimed, TaskRetry, TaskVerified},
		TaskApplied:  {TaskVerified},
		TaskVerified: {},
	},
}

// OutboxStatus is event_outbox.status.
type OutboxStatus string

// The outbox event's states.
const (
	OutboxPending OutboxStatus = "PENDING"
	OutboxRetry   OutboxStatus = "RETRY"
	OutboxSending OutboxStatus = "SENDING"
	OutboxManual  OutboxStatus = "MANUAL"
	OutboxSent    OutboxStatus = "SENT"
)

// Outbox: event_outbox (design.md#outbox). SENDING again from SENDING is a retake
// after the lease expired.
var Outbox = Machine[OutboxStatus]{
	Table:   "event_outbox",
	Initial: []OutboxStatus{OutboxPending},
	Next: map[OutboxStatus][]OutboxStatus{
		OutboxPending: {OutboxSending},
		OutboxRetry:   {OutboxSending},
		OutboxSending: {OutboxSending, OutboxSent, OutboxRetry, OutboxManual},
		OutboxManual:  {OutboxRetry},
		OutboxSent:    {},
	},
}

// PaymentStatus is payment_record.status (and a provider callback's status).
type PaymentStatus string

// The payment's states.
const (
	PaymentSuccess   PaymentStatus = "SUCCESS"
	PaymentFailed    PaymentStatus = "FAILED"
	PaymentRefunding PaymentStatus = "REFUNDING"
	PaymentRefunded  PaymentStatus = "REFUNDED"
)

// Payment: payment_record (design.md#payment-cancel).
var Payment = Machine[PaymentStatus]{
	Table:   "payment_record",
	Initial: []PaymentStatus{PaymentSuccess, PaymentFailed},
	Next: map[PaymentStatus][]PaymentStatus{
		PaymentSuccess:   {PaymentRefunding},
		PaymentRefunding: {PaymentRefunded},
		PaymentRefunded:  {},
		PaymentFailed:    {},
	},
}

// RepairStatus is repair_task.status.
type RepairStatus string

// The repair task's states.
const (
	RepairPending  RepairStatus = "PENDING"
	RepairManual   RepairStatus = "MANUAL"
	RepairApplied  RepairStatus = "APPLIED"
	RepairRejected RepairStatus = "REJECTED"
)

// RepairTask: repair_task (design.md#runbook).
var RepairTask = Machine[RepairStatus]{
	Table:   "repair_task",
	Initial: []RepairStatus{RepairPending, RepairManual},
	Next: map[RepairStatus][]RepairStatus{
		RepairPending:  {RepairApplied},
		RepairManual:   {RepairApplied, RepairRejected},
		RepairApplied:  {},
		RepairRejected: {},
	},
}

// QuarantineStatus is message_quarantine.status.
type QuarantineStatus string

// The quarantined message's states.
const (
	QuarantineOpen      QuarantineStatus = "OPEN"
	QuarantineReplayed  QuarantineStatus = "REPLAYED"
	QuarantineDiscarded QuarantineStatus = "DISCARDED"
)

// Quarantine: message_quarantine.
var Quarantine = Machine[QuarantineStatus]{
	Table:   "message_quarantine",
	Initial: []QuarantineStatus{QuarantineOpen},
	Next: map[QuarantineStatus][]QuarantineStatus{
		QuarantineOpen:      {QuarantineReplayed, QuarantineDiscarded},
		QuarantineReplayed:  {},
		QuarantineDiscarded: {},
	},
}

// HashStatus is the Redis reservation hash's status field: the projection
// of a reservation's fate that the gateway answers from.
type HashStatus string

// The Redis reservation hash's states.
const (
	HashReserved      HashStatus = "RESERVED"
	HashOrderCreated  HashStatus = "ORDER_CREATED"
	HashOrderRejected HashStatus = "ORDER_REJECTED"
	HashCompensating  HashStatus = "COMPENSATING"
	HashCompensated   HashStatus = "COMPENSATED"
	HashCancelPending HashStatus = "CANCEL_PENDING"
	HashCancelled     HashStatus = "CANCELLED"
)

// RedisHash: the reservation hash (design.md#redis-keys). reserve.lua
// writes it RESERVED; rebuild_projection.lua writes a lost one as
// ORDER_CREATED; the projector moves it on (project_order_created.lua,
// project_order_rejected.lua), the compensator returns its unit
// (compensate.lua, which also takes a reservation the order consumer never
// saw), the canceller releases a cancelled order's (release_after_cancel.lua).
// No script writes COMPENSATING or CANCEL_PENDING; the scripts take them as
// the seed's do (compensate.lua COMPENSATING like ORDER_REJECTED,
// release_after_cancel.lua CANCEL_PENDING like ORDER_CREATED: a hash set so
// while repairing by hand). They also name PostgreSQL's PAID and
// MANUAL_REVIEW, which never reach a hash, and leave such a hash as it is.
var RedisHash = Machine[HashStatus]{
	Table:   "redis reservation hash",
	Initial: []HashStatus{HashReserved, HashOrderCreated},
	Next: map[HashStatus][]HashStatus{
		HashReserved:      {HashOrderCreated, HashOrderRejected, HashCompensated, HashCancelled},
		HashOrderCreated:  {HashCancelled},
		HashOrderRejected: {HashCompensated},
		HashCompensating:  {HashCompensated},
		HashCancelPending: {HashCancelled},
		HashCompensated:   {},
		HashCancelled:     {},
	},
}

// HasOrder: the hash records its reservation's order (cancelled or not yet).
func (s HashStatus) HasOrder() bool { return s == HashOrderCreated || s == HashCancelPending }

// SendState is the Redis reservation hash's mq_state: what the gateway knows
// of the order-create message's send (design.md#send).
type SendState string

// The send's states.
const (
	SendPending   SendState = "PENDING"
	SendUnknown   SendState = "UNKNOWN"
	SendPublished SendState = "PUBLISHED"
)

// All machines.
var All = []Any{Reservation, Order, CompensationTask, Outbox, Payment, RepairTask, Quarantine, RedisHash}

// Mermaid draws the machine as a Mermaid state diagram (docs/states.md).
func (m Machine[S]) Mermaid() string {
	var b strings.Builder
	b.WriteString("```mermaid\nstateDiagram-v2\n")
	initial := append([]S(nil), m.Initial...)
	slices.Sort(initial)
	for _, s := range initial {
		fmt.Fprintf(&b, "    [*] --> %s\n", s)
	}
	for _, from := range m.States() {
		tos := append([]S(nil), m.Next[from]...)
		slices.Sort(tos)
		for _, to := range tos {
			fmt.Fprintf(&b, "    %s --> %s\n", from, to)
		}
	}
	b.WriteString("```\n")
	return b.String()
}
