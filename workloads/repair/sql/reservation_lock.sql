-- ReservationLock: a reservation's state, locked for a freeze or its lift. $1 reservation.
SELECT status, version, activity_id, order_id FROM inventory_reservation WHERE reservation_id = $1 FOR UPDATE;
