-- Schedules (DESIGN §16; include/tasker/schedule.h): cron expressions that
-- submit a template once per slot. `cursor` is the schedule's progress:
-- every slot at or before it is done (fired or skipped). It moves only by
-- compare-and-set, in the same transaction as the slot's task, whose
-- identity is the slot: so a slot fires once however many orchestrators
-- run. last_task_id has no foreign key: retention may remove the task.
CREATE TABLE schedules (
  name          TEXT PRIMARY KEY,
  cron          TEXT NOT NULL,
  zone          TEXT,                 -- tz database name; NULL: UTC
  template      TEXT NOT NULL,        -- "name" or "namespace/name"
  version       TEXT,                 -- NULL: the newest when a slot fires
  context       TEXT NOT NULL,        -- JSON object
  missed        TEXT NOT NULL,        -- skip | catch_up
  source        TEXT NOT NULL,        -- config | cli
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  cursor        INTEGER NOT NULL,
  last_fired    INTEGER,
  last_task_id  INTEGER
);
