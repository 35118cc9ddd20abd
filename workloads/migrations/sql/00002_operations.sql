-- +goose Up
-- Tables the operator and the safety net need: activity control flags,
-- consumer heartbeats (measured PostgreSQL capacity), reconcile runs and
-- their anomalies.

CREATE TABLE activity_control (
    activity_id           bigint      PRIMARY KEY,
    window_state          varchar(16) NOT NULL DEFAULT 'NOT_STARTED',
    compensation_paused   boolean     NOT NULL DEFAULT false,
    pause_reason          text,
    business_deadline_ms  bigint      NOT NULL DEFAULT 300000,
    payment_window_ms     bigint      NOT NULL DEFAULT 900000,
    generation            bigint      NOT NULL DEFAULT 0,
    updated_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_activity_control_window CHECK (window_state IN ('NOT_STARTED', 'ACTIVE', 'PAUSED', 'ENDED')),
    CONSTRAINT ck_activity_control_durations CHECK (business_deadline_ms > 0 AND payment_window_ms > 0)
);

CREATE TABLE consumer_heartbeat (
    consumer_id          text             PRIMARY KEY,
    workload             varchar(32)      NOT NULL,
    activity_id          bigint,
    commits_total        bigint           NOT NULL DEFAULT 0,
    commit_rate_per_sec  double precision NOT NULL DEFAULT 0,
    commit_p50_ms        double precision NOT NULL DEFAULT 0,
    commit_p99_ms        double precision NOT NULL DEFAULT 0,
    in_flight            integer          NOT NULL DEFAULT 0,
    reported_at          timestamptz      NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_consumer_heartbeat_values CHECK (
        commits_total >= 0 AND commit_rate_per_sec >= 0 AND commit_p50_ms >= 0 AND commit_p99_ms >= 0 AND in_flight >= 0)
);
CREATE INDEX idx_consumer_heartbeat_recent ON consumer_heartbeat (workload, reported_at);

CREATE TABLE reconcile_run (
    run_id            uuid        PRIMARY KEY,
    activity_id       bigint      NOT NULL,
    watermark         timestamptz NOT NULL,
    status            varchar(16) NOT NULL DEFAULT 'RUNNING',
    started_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at       timestamptz,
    anomalies_found   integer     NOT NULL DEFAULT 0,
    auto_repaired     integer     NOT NULL DEFAULT 0,
    manual_required   integer     NOT NULL DEFAULT 0,
    summary           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT ck_reconcile_run_status CHECK (status IN ('RUNNING', 'CLEAN', 'REPAIRED', 'ANOMALIES', 'FAILED'))
);
-- At most one running reconcile per activity: two runs at once never repair twice.
CREATE UNIQUE INDEX uq_reconcile_run_active ON reconcile_run (activity_id) WHERE status = 'RUNNING';

CREATE TABLE reconcile_anomaly (
    anomaly_id       bigserial   PRIMARY KEY,
    run_id           uuid        NOT NULL REFERENCES reconcile_run (run_id),
    anomaly_type     varchar(64) NOT NULL,
    severity         varchar(16) NOT NULL,
    activity_id      bigint      NOT NULL,
    sku_id           bigint,
    object_id        text,
    delta            bigint,
    evidence         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    repair_id        bytea       REFERENCES repair_task (repair_id),
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_reconcile_anomaly_severity CHECK (severity IN ('INFO', 'WARNING', 'CRITICAL'))
);
CREATE INDEX idx_reconcile_anomaly_run ON reconcile_anomaly (run_id);

-- +goose Down
DROP TABLE reconcile_anomaly;
DROP TABLE reconcile_run;
DROP TABLE consumer_heartbeat;
DROP TABLE activity_control;
