-- ReservationStatus: a reservation as PostgreSQL, the authority, has it,
-- for GET /reservations/{id} when Redis no longer does (the only statement
-- the gateway runs: its role may read inventory_reservation and nothing else).
SELECT status, user_id, order_id, reason_code FROM inventory_reservation WHERE reservation_id = $1;
