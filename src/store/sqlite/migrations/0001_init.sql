-- tasker SQLite schema, version 1. Released migrations are never edited;
-- changes go into a new numbered file.

CREATE TABLE templates (
  id          INTEGER PRIMARY KEY,
  namespace   TEXT NOT NULL,
  name        TEXT NOT NULL,
  version     TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  definition  TEXT NOT NULL,            -- normalized JSON of the template
  digest      TEXT NOT NULL,            -- of the definition, to spot re-adds
  created_at  INTEGER NOT NULL,
  UNIQUE (namespace, name, version)
);

-- The DAG of a template, by step position: children are found from here
-- rather than from per-task rows, so a task costs one row per step.
CREATE TABLE template_edges (
  template_id INTEGER NOT NULL REFERENCES templates (id),
  parent_idx  INTEGER NOT NULL,
  child_idx   INTEGER NOT NULL,
  PRIMARY KEY (template_id, parent_idx, child_idx)
) WITHOUT ROWID;

CREATE TABLE tasks (
  id             INTEGER PRIMARY KEY,
  template_id    INTEGER NOT NULL REFERENCES templates (id),
  identity       TEXT UNIQUE,
  context        TEXT NOT NULL,
  state          TEXT NOT NULL,
  steps_total    INTEGER NOT NULL,
  steps_done     INTEGER NOT NULL DEFAULT 0, -- complete or resolved_manually
  steps_error    INTEGER NOT NULL DEFAULT 0,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL,
  finished_at    INTEGER
);
CREATE INDEX tasks_state ON tasks (state);

CREATE TABLE steps (
  id                INTEGER PRIMARY KEY,
  task_id           INTEGER NOT NULL REFERENCES tasks (id),
  idx               INTEGER NOT NULL,   -- position in the template
  name              TEXT NOT NULL,
  state             TEXT NOT NULL,
  attempts          INTEGER NOT NULL DEFAULT 0,
  max_attempts      INTEGER NOT NULL,
  retryable         INTEGER NOT NULL,
  backoff           TEXT NOT NULL,      -- profile name
  parents_remaining INTEGER NOT NULL,
  run_at            INTEGER NOT NULL,
  lease_owner       TEXT,
  lease_expires_at  INTEGER,
  last_delay_ms     INTEGER NOT NULL DEFAULT 0,
  last_error        TEXT,
  results           TEXT,
  UNIQUE (task_id, idx)
);
-- Readiness is a range scan of this index: only rows that could run once
-- their time comes are in it, so stored history does not slow claims.
CREATE INDEX steps_ready ON steps (run_at)
  WHERE state IN ('pending', 'waiting_for_retry') AND parents_remaining = 0;
CREATE INDEX steps_leases ON steps (lease_expires_at) WHERE state = 'in_progress';

CREATE TABLE attempts (
  id           INTEGER PRIMARY KEY,
  step_id      INTEGER NOT NULL REFERENCES steps (id),
  attempt      INTEGER NOT NULL,
  owner        TEXT NOT NULL,
  started_at   INTEGER NOT NULL,
  finished_at  INTEGER,
  outcome      TEXT,          -- NULL while running
  error        TEXT,
  delay_ms     INTEGER,
  delay_source TEXT,
  next_run_at  INTEGER,
  UNIQUE (step_id, attempt)
);

CREATE TABLE transitions (
  id         INTEGER PRIMARY KEY,
  task_id    INTEGER NOT NULL,
  step_id    INTEGER,         -- NULL for a task transition
  from_state TEXT,
  to_state   TEXT NOT NULL,
  at         INTEGER NOT NULL,
  reason     TEXT NOT NULL,
  attempt    INTEGER
);
CREATE INDEX transitions_task ON transitions (task_id);

-- Counters that must survive the process (refused writes, expired leases).
CREATE TABLE counters (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
