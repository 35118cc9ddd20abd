-- ReservationsKnown: which of these reservation ids PostgreSQL has. $1 ids.
SELECT reservation_id FROM inventory_reservation WHERE reservation_id = ANY($1);
