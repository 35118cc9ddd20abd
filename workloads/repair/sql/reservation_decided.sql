-- ReservationDecided: lock a reservation before its compensation task is
-- written (the step re-checks what the finding saw). $1 reservation.
SELECT status FROM inventory_reservation WHERE reservation_id = $1 FOR UPDATE;
