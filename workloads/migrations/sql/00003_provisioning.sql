-- +goose Up
-- The operator's stock provisioning ledger: one row per SKU and manifest
-- generation that changed the stock, so a stock increase is applied to
-- PostgreSQL exactly once however often the operator reconciles.

CREATE TABLE stock_provision (
    activity_id   bigint      NOT NULL,
    sku_id        bigint      NOT NULL,
    generation    bigint      NOT NULL,
    target_stock  bigint      NOT NULL,
    delta         bigint      NOT NULL,
    applied_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (activity_id, sku_id, generation),
    CONSTRAINT ck_stock_provision_values CHECK (generation > 0 AND target_stock >= 0 AND delta >= 0)
);

-- seckill_provision_stock sets a SKU's PostgreSQL stock to target once per
-- generation; stock only grows. Returns APPLIED, ALREADY_APPLIED or
-- STOCK_DECREASE_REFUSED (nothing changed).
-- +goose StatementBegin
CREATE FUNCTION seckill_provision_stock(p_activity bigint, p_sku bigint, p_target bigint, p_generation bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_initial bigint;
    v_applied bigint;
BEGIN
    IF p_target < 0 OR p_generation <= 0 THEN
        RAISE EXCEPTION 'seckill_provision_stock: target % and generation % must be non-negative and positive', p_target, p_generation;
    END IF;
    INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock)
    VALUES (p_activity, p_sku, 0, 0)
    ON CONFLICT (activity_id, sku_id) DO NOTHING;
    SELECT initial_stock INTO v_initial FROM sku_inventory
    WHERE activity_id = p_activity AND sku_id = p_sku FOR UPDATE;
    SELECT max(generation) INTO v_applied FROM stock_provision
    WHERE activity_id = p_activity AND sku_id = p_sku;
    IF v_applied IS NOT NULL AND p_generation <= v_applied THEN
        RETURN 'ALREADY_APPLIED';
    END IF;
    IF p_target < v_initial THEN
        RETURN 'STOCK_DECREASE_REFUSED';
    END IF;
    UPDATE sku_inventory
    SET initial_stock = p_target,
        available_stock = available_stock + (p_target - v_initial),
        version = version + 1,
        updated_at = clock_timestamp()
    WHERE activity_id = p_activity AND sku_id = p_sku;
    INSERT INTO stock_provision (activity_id, sku_id, generation, target_stock, delta)
    VALUES (p_activity, p_sku, p_generation, p_target, p_target - v_initial);
    RETURN 'APPLIED';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION seckill_provision_stock(bigint, bigint, bigint, bigint);
DROP TABLE stock_provision;
