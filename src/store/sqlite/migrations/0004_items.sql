-- Batch steps (DESIGN §9): a step that owns items and delivers them to its
-- handler, acking or giving up on each one separately.

-- A batch step's settings, resolved from the template and the [batch]
-- configuration when the task is submitted (as max_attempts is), so a
-- later configuration change does not alter a running step.
CREATE TABLE batch_steps (
  step_id             INTEGER PRIMARY KEY REFERENCES steps (id),
  max_in_call_retries INTEGER NOT NULL,
  max_item_attempts   INTEGER NOT NULL,
  fail_if_any_gave_up INTEGER NOT NULL
);

-- One row per item, stored with the task. Keyed by position so that a
-- step's items are one primary-key range, read in submission order; no
-- rowid, no other index and no foreign key (a per-row lookup of the step;
-- items are only written together with their step), so inserting and acking
-- 100,000 items touches one b-tree. Keys are unique per step (checked at
-- submit).
CREATE TABLE items (
  step_id    INTEGER NOT NULL,
  seq        INTEGER NOT NULL,         -- position in the submitted array, from 0
  key        TEXT NOT NULL,
  data       TEXT,                     -- the element when it was an object (JSON), else NULL
  state      TEXT NOT NULL DEFAULT 'pending', -- pending, acked, gave_up
  attempts   INTEGER NOT NULL DEFAULT 0,      -- deliveries recorded (the acking one included)
  last_error TEXT,                     -- the last rejection's reason
  PRIMARY KEY (step_id, seq)
) WITHOUT ROWID;
