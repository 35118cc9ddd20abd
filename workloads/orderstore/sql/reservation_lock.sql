-- ReservationLock: the row every path that decides a reservation's fate locks.
SELECT status, order_id, message_id, user_id, activity_id, sku_id
FROM inventory_reservation
WHERE reservation_id = $1
FOR UPDATE;
