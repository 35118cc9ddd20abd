-- +goose Up
-- Core tables of design.md#tables, design.md#order-transaction: inventory, reservations, orders, inbox,
-- outbox, compensation, ledger, payments, repairs.

CREATE TABLE sku_inventory (
    activity_id      bigint      NOT NULL,
    sku_id           bigint      NOT NULL,
    initial_stock    bigint      NOT NULL,
    available_stock  bigint      NOT NULL,
    occupied_stock   bigint      NOT NULL DEFAULT 0,
    sold_stock       bigint      NOT NULL DEFAULT 0,
    version          bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (activity_id, sku_id),
    CONSTRAINT ck_sku_inventory_non_negative CHECK (
        initial_stock >= 0 AND available_stock >= 0 AND occupied_stock >= 0 AND sold_stock >= 0),
    CONSTRAINT ck_sku_inventory_conservation CHECK (
        initial_stock = available_stock + occupied_stock + sold_stock)
);

CREATE TABLE inventory_reservation (
    reservation_id    uuid        PRIMARY KEY,
    request_id        uuid        NOT NULL,
    activity_id       bigint      NOT NULL,
    sku_id            bigint      NOT NULL,
    user_id           bigint      NOT NULL,
    -- The Redis stock bucket the reservation was taken from (-1: unbucketed):
    -- compensation and projection find its keys through it.
    bucket            integer     NOT NULL DEFAULT -1,
    message_id        uuid        NOT NULL,
    order_id          uuid,
    status            varchar(32) NOT NULL,
    reason_code       varchar(64),
    version           bigint      NOT NULL DEFAULT 0,
    reserved_at       timestamptz NOT NULL,
    business_deadline timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (message_id),
    UNIQUE (user_id, request_id),
    CONSTRAINT ck_inventory_reservation_status CHECK (status IN (
        'RESERVED', 'ORDER_CREATED', 'ORDER_REJECTED', 'COMPENSATING',
        'COMPENSATED', 'CANCELLED', 'MANUAL_REVIEW')),
    CONSTRAINT ck_inventory_reservation_bucket CHECK (bucket >= -1 AND bucket < 64)
);
CREATE INDEX idx_inventory_reservation_reconcile
    ON inventory_reservation (status, updated_at, reservation_id);
CREATE INDEX idx_inventory_reservation_sku
    ON inventory_reservation (activity_id, sku_id, status);

CREATE TABLE orders (
    order_id        uuid        PRIMARY KEY,
    activity_id     bigint      NOT NULL,
    sku_id          bigint      NOT NULL,
    user_id         bigint      NOT NULL,
    request_id      uuid        NOT NULL,
    reservation_id  uuid        NOT NULL,
    status          varchar(32) NOT NULL DEFAULT 'CREATED',
    amount_cents    bigint      NOT NULL DEFAULT 0,
    version         bigint      NOT NULL DEFAULT 0,
    expires_at      timestamptz NOT NULL,
    paid_at         timestamptz,
    cancelled_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT uq_orders_activity_sku_user UNIQUE (activity_id, sku_id, user_id),
    CONSTRAINT uq_orders_reservation_id UNIQUE (reservation_id),
    CONSTRAINT ck_orders_status CHECK (status IN (
        'CREATED', 'PAYING', 'CANCEL_PENDING', 'PAID', 'CANCELLED', 'REFUNDING', 'REFUNDED')),
    CONSTRAINT ck_orders_amount CHECK (amount_cents >= 0)
);
CREATE INDEX idx_orders_expiry ON orders (expires_at) WHERE status IN ('CREATED', 'PAYING', 'CANCEL_PENDING');

CREATE TABLE consumer_inbox (
    consumer_group   text        NOT NULL,
    message_id       uuid        NOT NULL,
    topic            text        NOT NULL,
    event_type       text        NOT NULL,
    reservation_id   uuid,
    request_id       uuid,
    payload_hash     bytea       NOT NULL,
    result_code      text        NOT NULL,
    order_id         uuid,
    processed_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer_group, message_id),
    CONSTRAINT ck_consumer_inbox_hash CHECK (octet_length(payload_hash) = 32)
);

-- Messages that could not be processed safely (malformed, unknown schema,
-- same id with a different payload): kept with their evidence for review.
CREATE TABLE message_quarantine (
    quarantine_id    uuid        PRIMARY KEY,
    consumer_group   text        NOT NULL,
    topic            text        NOT NULL,
    broker_message_id text       NOT NULL,
    message_id       uuid,
    reason_code      varchar(64) NOT NULL,
    detail           text        NOT NULL,
    payload          bytea       NOT NULL,
    payload_hash     bytea       NOT NULL,
    status           varchar(16) NOT NULL DEFAULT 'OPEN',
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    resolved_at      timestamptz,
    UNIQUE (consumer_group, broker_message_id),
    CONSTRAINT ck_message_quarantine_status CHECK (status IN ('OPEN', 'REPLAYED', 'DISCARDED'))
);

CREATE TABLE event_outbox (
    event_id          uuid        PRIMARY KEY,
    aggregate_type    varchar(32) NOT NULL,
    aggregate_id      uuid        NOT NULL,
    event_type        varchar(64) NOT NULL,
    schema_version    integer     NOT NULL,
    topic             text        NOT NULL DEFAULT 'seckill-order-events',
    message_key       text        NOT NULL,
    payload           jsonb       NOT NULL,
    deliver_at        timestamptz,
    status            varchar(16) NOT NULL DEFAULT 'PENDING',
    attempt_count     integer     NOT NULL DEFAULT 0,
    next_retry_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_owner       text,
    lease_until       timestamptz,
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    sent_at           timestamptz,
    CONSTRAINT ck_event_outbox_status CHECK (status IN ('PENDING', 'SENDING', 'RETRY', 'SENT', 'MANUAL')),
    CONSTRAINT ck_event_outbox_lease CHECK (status <> 'SENDING' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL))
);
CREATE INDEX idx_event_outbox_dispatch
    ON event_outbox (next_retry_at, created_at)
    WHERE status IN ('PENDING', 'RETRY', 'SENDING');

CREATE TABLE compensation_task (
    task_id           uuid        PRIMARY KEY,
    reservation_id    uuid        NOT NULL REFERENCES inventory_reservation (reservation_id),
    compensation_type varchar(32) NOT NULL,
    idempotency_key   text        NOT NULL,
    status            varchar(16) NOT NULL DEFAULT 'PENDING',
    attempt_count     integer     NOT NULL DEFAULT 0,
    next_retry_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_owner       text,
    lease_until       timestamptz,
    last_result       varchar(64),
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (idempotency_key),
    CONSTRAINT ck_compensation_task_status CHECK (status IN (
        'PENDING', 'CLAIMED', 'RETRY', 'APPLIED', 'VERIFIED', 'MANUAL'))
);
CREATE INDEX idx_compensation_task_dispatch
    ON compensation_task (next_retry_at, created_at)
    WHERE status IN ('PENDING', 'RETRY', 'CLAIMED');

-- Every stock movement, once: the idempotency key names the business step
-- (OCCUPY:<reservation>, RELEASE:<order>, SELL:<payment>, PROVISION:<sku>:<generation>).
CREATE TABLE inventory_ledger (
    ledger_id        bigserial   PRIMARY KEY,
    activity_id      bigint      NOT NULL,
    sku_id           bigint      NOT NULL,
    idempotency_key  text        NOT NULL,
    entry_type       varchar(32) NOT NULL,
    delta_available  bigint      NOT NULL DEFAULT 0,
    delta_occupied   bigint      NOT NULL DEFAULT 0,
    delta_sold       bigint      NOT NULL DEFAULT 0,
    delta_initial    bigint      NOT NULL DEFAULT 0,
    reservation_id   uuid,
    order_id         uuid,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT uq_inventory_ledger_idempotency UNIQUE (idempotency_key),
    CONSTRAINT ck_inventory_ledger_type CHECK (entry_type IN (
        'PROVISION', 'STOCK_INCREASE', 'OCCUPY', 'RELEASE', 'SELL', 'REFUND_RELEASE')),
    CONSTRAINT ck_inventory_ledger_balanced CHECK (
        delta_initial = delta_available + delta_occupied + delta_sold)
);
CREATE INDEX idx_inventory_ledger_sku ON inventory_ledger (activity_id, sku_id, created_at);

CREATE TABLE payment_record (
    payment_id               uuid        PRIMARY KEY,
    order_id                 uuid        NOT NULL REFERENCES orders (order_id),
    provider                 varchar(32) NOT NULL,
    provider_transaction_id  text        NOT NULL,
    amount_cents             bigint      NOT NULL,
    status                   varchar(16) NOT NULL,
    paid_at                  timestamptz,
    created_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_payment_record_status CHECK (status IN ('SUCCESS', 'REFUNDING', 'REFUNDED', 'FAILED')),
    CONSTRAINT ck_payment_record_amount CHECK (amount_cents >= 0)
);
CREATE UNIQUE INDEX uq_payment_provider_transaction
    ON payment_record (provider, provider_transaction_id);
CREATE INDEX idx_payment_record_order ON payment_record (order_id);

CREATE TABLE repair_task (
    repair_id        bytea       PRIMARY KEY,
    object_type      varchar(32) NOT NULL,
    object_id        text        NOT NULL,
    rule_name        varchar(64) NOT NULL,
    expected_version bigint      NOT NULL,
    target_state     varchar(32) NOT NULL,
    status           varchar(16) NOT NULL DEFAULT 'PENDING',
    automatic        boolean     NOT NULL,
    evidence         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    operator         text        NOT NULL,
    approver         text,
    reason           text        NOT NULL,
    incident_id      text,
    before_state     jsonb,
    after_state      jsonb,
    run_id           uuid,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_repair_task_id CHECK (octet_length(repair_id) = 32),
    CONSTRAINT ck_repair_task_status CHECK (status IN ('PENDING', 'APPLIED', 'MANUAL', 'REJECTED'))
);
CREATE INDEX idx_repair_task_open ON repair_task (status, created_at) WHERE status IN ('PENDING', 'MANUAL');

-- +goose Down
DROP TABLE repair_task;
DROP TABLE payment_record;
DROP TABLE inventory_ledger;
DROP TABLE compensation_task;
DROP TABLE event_outbox;
DROP TABLE message_quarantine;
DROP TABLE consumer_inbox;
DROP TABLE orders;
DROP TABLE inventory_reservation;
DROP TABLE sku_inventory;
