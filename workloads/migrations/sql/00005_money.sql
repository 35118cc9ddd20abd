-- +goose Up
-- Money (issue 15): each SKU has a price, set from the SeckillActivity when
-- its stock is provisioned, and every order copies the price of its SKU when
-- it is created, so a payment callback is checked against what the buyer
-- owes — amount and currency — and never against 0.

ALTER TABLE sku_inventory
    ADD COLUMN price_cents bigint  NOT NULL DEFAULT 0,
    ADD COLUMN currency    char(3) NOT NULL DEFAULT 'CNY',
    ADD CONSTRAINT ck_sku_inventory_price CHECK (price_cents >= 0 AND currency ~ '^[A-Z]{3}$');

ALTER TABLE orders
    ADD COLUMN currency char(3) NOT NULL DEFAULT 'CNY',
    ADD CONSTRAINT ck_orders_currency CHECK (currency ~ '^[A-Z]{3}$');

ALTER TABLE payment_record
    ADD COLUMN currency char(3) NOT NULL DEFAULT 'CNY';

-- seckill_set_price sets the price of a provisioned SKU; orders created from
-- then on carry it. Returns false when the SKU is not provisioned.
-- +goose StatementBegin
CREATE FUNCTION seckill_set_price(p_activity bigint, p_sku bigint, p_price bigint, p_currency text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF p_price <= 0 OR p_currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'seckill_set_price: price % must be positive and currency % three capital letters', p_price, p_currency;
    END IF;
    UPDATE sku_inventory SET price_cents = p_price, currency = p_currency, updated_at = clock_timestamp()
    WHERE activity_id = p_activity AND sku_id = p_sku
      AND (price_cents, currency) IS DISTINCT FROM (p_price, p_currency::char(3));
    RETURN EXISTS (SELECT 1 FROM sku_inventory WHERE activity_id = p_activity AND sku_id = p_sku);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION seckill_set_price(bigint, bigint, bigint, text);
ALTER TABLE payment_record DROP COLUMN currency;
ALTER TABLE orders DROP CONSTRAINT ck_orders_currency, DROP COLUMN currency;
ALTER TABLE sku_inventory DROP CONSTRAINT ck_sku_inventory_price, DROP COLUMN currency, DROP COLUMN price_cents;
