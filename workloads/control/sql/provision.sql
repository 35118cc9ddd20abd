-- ProvisionStock: a SKU's PostgreSQL stock set to the manifest's target once
-- per generation (migration 00003). $1 activity, $2 sku, $3 target, $4 generation.
SELECT seckill_provision_stock($1, $2, $3, $4);
