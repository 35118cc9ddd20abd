-- CompensationComplete, part 1: COMPENSATING -> COMPENSATED.
UPDATE inventory_reservation
SET status = 'COMPENSATED', version = version + 1, updated_at = clock_timestamp()
WHERE reservation_id = $1 AND status = 'COMPENSATING';
