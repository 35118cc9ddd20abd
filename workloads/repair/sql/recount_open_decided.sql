-- RecountOpenDecided: reservations Redis still holds open although
-- PostgreSQL gave them an order: their projection (or release) is pending
-- and a recount now would count them twice. $1 reservation ids.
SELECT reservation_id FROM inventory_reservation
WHERE reservation_id = ANY($1::uuid[]) AND order_id IS NOT NULL;
