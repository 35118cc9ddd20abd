-- ReleaseInFlight: whether an order's ORDER_CANCELLED event is still on its
-- way to the projection — not yet sent by the relay, or sent after the
-- watermark — so that a cancel whose release Redis has not applied is in
-- flight, not lost. $1 order, $2 watermark.
SELECT NOT EXISTS (
    SELECT 1 FROM event_outbox
    WHERE aggregate_id = $1 AND event_type = 'ORDER_CANCELLED' AND status = 'SENT' AND sent_at < $2);
