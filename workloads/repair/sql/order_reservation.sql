-- OrderReservation: the reservation of an order. $1 order.
SELECT reservation_id FROM orders WHERE order_id = $1;
