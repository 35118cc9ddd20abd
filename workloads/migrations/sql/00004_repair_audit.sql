-- +goose Up
-- Repairs (design.md#runbook): a repair task is claimed with a lease so that two
-- runs never apply it twice, a failed attempt is kept with its error and
-- taken again later, and the audit trail records when it was applied and
-- through what (the standard step, a task id). Freezing records the state a
-- reservation had, so lifting the freeze restores it.

ALTER TABLE repair_task
    ADD COLUMN attempt_count integer     NOT NULL DEFAULT 0,
    ADD COLUMN lease_until   timestamptz,
    ADD COLUMN last_error    text,
    ADD COLUMN applied_via   text,
    ADD COLUMN applied_at    timestamptz,
    ADD COLUMN activity_id   bigint;

CREATE INDEX idx_repair_task_object ON repair_task (object_type, object_id);
CREATE INDEX idx_repair_task_activity ON repair_task (activity_id, status);

CREATE TABLE reservation_freeze (
    reservation_id   uuid        PRIMARY KEY REFERENCES inventory_reservation (reservation_id),
    frozen_status    varchar(32) NOT NULL,
    repair_id        bytea       NOT NULL REFERENCES repair_task (repair_id),
    frozen_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ck_reservation_freeze_status CHECK (frozen_status <> 'MANUAL_REVIEW')
);

-- +goose Down
DROP TABLE reservation_freeze;
DROP INDEX idx_repair_task_activity;
DROP INDEX idx_repair_task_object;
ALTER TABLE repair_task
    DROP COLUMN activity_id,
    DROP COLUMN applied_at,
    DROP COLUMN applied_via,
    DROP COLUMN last_error,
    DROP COLUMN lease_until,
    DROP COLUMN attempt_count;
