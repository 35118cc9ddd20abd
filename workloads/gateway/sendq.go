package gateway

import (
	"context"
	"sync"

	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// sendQueue hands reservations recorded in Redis to workers that send
// their order-create messages, so that the answer (QUEUED) does not wait
// for the broker. Nothing is weakened by answering first: the reservation
// and its send_due entry are in Redis before the answer either way, and a
// send that never happens (a crash with the queue full, a broker that does
// not answer) is made by the scanner after SendGrace with the same message
// id. A full queue sends in the request (back-pressure, never a drop).
type sendQueue struct {
	mu     sync.RWMutex
	closed bool
	q      chan outgoing
	wg     sync.WaitGroup
}

// outgoing is a reservation to send and its request's breaker ticket,
// answered by the send.
type outgoing struct {
	rr     redisstore.ReserveRequest
	ticket Ticket
}

func newSendQueue(workers, size int, send func(context.Context, outgoing)) *sendQueue {
	sq := &sendQueue{q: make(chan outgoing, size)}
	for range workers {
		sq.wg.Add(1)
		go func() {
			defer sq.wg.Done()
			for o := range sq.q {
				send(context.Background(), o)
			}
		}()
	}
	return sq
}

// offer queues rr; false when the queue is full or closed (the caller
// sends it itself).
func (sq *sendQueue) offer(o outgoing) bool {
	sq.mu.RLock()
	defer sq.mu.RUnlock()
	if sq.closed {
		return false
	}
	select {
	case sq.q <- o:
		return true
	default:
		return false
	}
}

// close stops taking reservations and waits until every queued one is
// sent (each send is bounded by SendAttempts × SendTimeout).
func (sq *sendQueue) close() {
	sq.mu.Lock()
	if !sq.closed {
		sq.closed = true
		close(sq.q)
	}
	sq.mu.Unlock()
	sq.wg.Wait()
}
