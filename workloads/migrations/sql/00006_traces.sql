-- +goose Up
-- Traces (design.md#traces): the W3C trace context of the step that wrote a
-- row, so that what is done with it later, by another process, joins the
-- reservation's trace: the relay's send of an outbox event, the payment
-- and the cancel of an order, the compensation of a rejected reservation.
-- NULL when the step was not traced; nullable without a default, so adding
-- the columns rewrites nothing.

ALTER TABLE event_outbox ADD COLUMN traceparent text;
ALTER TABLE orders ADD COLUMN traceparent text;
ALTER TABLE compensation_task ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE compensation_task DROP COLUMN traceparent;
ALTER TABLE orders DROP COLUMN traceparent;
ALTER TABLE event_outbox DROP COLUMN traceparent;
