// Package states holds the domain's state machines (design.md#flows, design.md#order-transaction): for each
// table with a status column, its states — the same list as the table's
// CHECK constraint — and the transitions the stores may make. The SQL files
// are what moves a row; every transition there is guarded by the current
// state in its WHERE clause, and states_test.go reads every SQL file of the
// workloads and refuses a transition these tables do not allow.
package states

import (
	"fmt"
	"sort"
	"strings"
)

// Machine is one table's states and allowed transitions.
type Machine struct {
	Table string
	// Initial are the states a row is inserted with.
	Initial []string
	// Next maps a state to the states it may move to.
	Next map[string][]string
}

// States lists every state, sorted.
func (m Machine) States() []string {
	seen := map[string]bool{}
	for _, s := range m.Initial {
		seen[s] = true
	}
	for from, tos := range m.Next {
		seen[from] = true
		for _, to := range tos {
			seen[to] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Allows reports whether from may move to to.
func (m Machine) Allows(from, to string) bool {
	for _, s := range m.Next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Reservation: inventory_reservation (design.md#send). MANUAL_REVIEW is the
// runbook's freeze (from any state) and its lifting (back to the state the
// freeze remembered).
var Reservation = Machine{
	Table:   "inventory_reservation",
	Initial: []string{"RESERVED"},
	Next: map[string][]string{
		"RESERVED":       {"ORDER_CREATED", "ORDER_REJECTED", "MANUAL_REVIEW"},
		"ORDER_CREATED":  {"CANCELLED", "MANUAL_REVIEW"},
		"ORDER_REJECTED": {"COMPENSATING", "COMPENSATED", "MANUAL_REVIEW"},
		"COMPENSATING":   {"COMPENSATED", "MANUAL_REVIEW"},
		"COMPENSATED":    {"MANUAL_REVIEW"},
		"CANCELLED":      {"MANUAL_REVIEW"},
		"MANUAL_REVIEW":  {"RESERVED", "ORDER_CREATED", "ORDER_REJECTED", "COMPENSATING", "COMPENSATED", "CANCELLED"},
	},
}

// Order: orders (design.md#payment-cancel). A PAID order is never cancelled. A
// success after the cancellation is refunded (the seed's REFUNDING and
// REFUNDED of the order; this implementation tracks the refund on the
// payment_record and leaves the order CANCELLED).
var Order = Machine{
	Table:   "orders",
	Initial: []string{"CREATED"},
	Next: map[string][]string{
		"CREATED":        {"PAYING", "CANCEL_PENDING", "PAID"},
		"PAYING":         {"CANCEL_PENDING", "PAID"},
		"CANCEL_PENDING": {"CANCELLED", "PAID"},
		"CANCELLED":      {"REFUNDING"},
		"REFUNDING":      {"REFUNDED"},
		"PAID":           {},
		"REFUNDED":       {},
	},
}

// CompensationTask: compensation_task (design.md#compensation). CLAIMED again from
// CLAIMED is a retake after the lease expired; MANUAL is taken only by the
// runbook's standard step.
var CompensationTask = Machine{
	Table:   "compensation_task",
	Initial: []string{"PENDING"},
	Next: map[string][]string{
		"PENDING":  {"CLAIMED", "MANUAL"},
		"RETRY":    {"CLAIMED", "MANUAL"},
		"CLAIMED":  {"CLAIMED", "APPLIED", "RETRY", "MANUAL"},
		"MANUAL":   {"CLAIMED", "RETRY", "VERIFIED"},
		"APPLIED":  {"VERIFIED"},
		"VERIFIED": {},
	},
}

// Outbox: event_outbox (design.md#outbox). SENDING again from SENDING is a retake
// after the lease expired.
var Outbox = Machine{
	Table:   "event_outbox",
	Initial: []string{"PENDING"},
	Next: map[string][]string{
		"PENDING": {"SENDING"},
		"RETRY":   {"SENDING"},
		"SENDING": {"SENDING", "SENT", "RETRY", "MANUAL"},
		"MANUAL":  {"RETRY"},
		"SENT":    {},
	},
}

// Payment: payment_record (design.md#payment-cancel).
var Payment = Machine{
	Table:   "payment_record",
	Initial: []string{"SUCCESS", "FAILED"},
	Next: map[string][]string{
		"SUCCESS":   {"REFUNDING"},
		"REFUNDING": {"REFUNDED"},
		"REFUNDED":  {},
		"FAILED":    {},
	},
}

// RepairTask: repair_task (design.md#runbook).
var RepairTask = Machine{
	Table:   "repair_task",
	Initial: []string{"PENDING", "MANUAL"},
	Next: map[string][]string{
		"PENDING":  {"APPLIED"},
		"MANUAL":   {"APPLIED", "REJECTED"},
		"APPLIED":  {},
		"REJECTED": {},
	},
}

// Quarantine: message_quarantine.
var Quarantine = Machine{
	Table:   "message_quarantine",
	Initial: []string{"OPEN"},
	Next: map[string][]string{
		"OPEN":      {"REPLAYED", "DISCARDED"},
		"REPLAYED":  {},
		"DISCARDED": {},
	},
}

// All machines.
var All = []Machine{Reservation, Order, CompensationTask, Outbox, Payment, RepairTask, Quarantine}

// Mermaid draws the machine as a Mermaid state diagram (docs/states.md).
func (m Machine) Mermaid() string {
	var b strings.Builder
	b.WriteString("```mermaid\nstateDiagram-v2\n")
	initial := append([]string(nil), m.Initial...)
	sort.Strings(initial)
	for _, s := range initial {
		fmt.Fprintf(&b, "    [*] --> %s\n", s)
	}
	for _, from := range m.States() {
		tos := append([]string(nil), m.Next[from]...)
		sort.Strings(tos)
		for _, to := range tos {
			fmt.Fprintf(&b, "    %s --> %s\n", from, to)
		}
	}
	b.WriteString("```\n")
	return b.String()
}
