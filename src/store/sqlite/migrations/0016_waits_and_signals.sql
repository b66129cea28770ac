-- Wait steps and signals (issue 24, DESIGN §18).
--
-- A wait step's claim parks it in state 'waiting': no lease, run_at its
-- timeout, its claim_id and that claim's attempt row kept open until a
-- signal or the timeout ends the attempt through the ordinary outcome
-- (sqlite_wait.c). Waiting steps whose timeout passed are found along
-- this index, as expired leases are along steps_leases.
CREATE INDEX steps_waiting ON steps (run_at) WHERE state = 'waiting';

-- Signals sent to steps: kept from when they are sent (perhaps before the
-- step waits) until the step is gone. claim_id is the attempt (claim) a
-- signal was delivered to, NULL until then; a signal whose attempt ended
-- without applying it (lease_expired, fenced_out) is delivered again to
-- the step's next wait. A key is the sender's idempotency key: the same
-- key again is answered as its first signal, never stored twice.
CREATE TABLE signals (
  id           INTEGER PRIMARY KEY,
  step_id      INTEGER NOT NULL,
  idem_key     TEXT,
  data         TEXT,
  error        TEXT,
  created_at   INTEGER NOT NULL,
  claim_id     INTEGER,
  delivered_at INTEGER
);
CREATE UNIQUE INDEX signals_by_key ON signals (step_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX signals_by_step ON signals (step_id, id);
-- Signals not delivered yet: few at any time, read by every wait_take.
CREATE INDEX signals_undelivered ON signals (step_id) WHERE claim_id IS NULL;
