-- VerifyOrderReservation (seed §11.6 step 6): one order per reservation.
-- $1 activity (0: all).
SELECT reservation_id, count(*)
FROM orders
WHERE ($1::bigint = 0 OR activity_id = $1)
GROUP BY reservation_id
HAVING count(*) > 1;
