-- CompensationAuthorize: the PostgreSQL CAS ORDER_REJECTED -> COMPENSATING.
-- A reservation already COMPENSATING (a worker died after this step) stays
-- authorized; anything else (ORDER_CREATED above all) is not.
WITH cas AS (
    UPDATE inventory_reservation
    SET status = 'COMPENSATING', version = version + 1, updated_at = clock_timestamp()
    WHERE reservation_id = $1 AND status = 'ORDER_REJECTED'
    RETURNING status
)
SELECT status FROM cas
UNION ALL
SELECT status FROM inventory_reservation WHERE reservation_id = $1 AND NOT EXISTS (SELECT 1 FROM cas);
