-- The hot statements write their ready rows themselves (issue 22).
--
-- The claim and the set statement of outcomes (postgres_claim.c,
-- postgres_record_set.c) write the ready row of each step they write in
-- the same statement (TK__PG_READY_UPDATE and its kin,
-- postgres_internal.h), and each of their updates of steps turns the
-- transaction's setting tasker.ready_written on for every row it writes.
-- A statement trigger's WHEN is evaluated as its update of steps ends, so
-- after such an update steps_ready_updated (0017) is not queued, and its
-- join of the transition tables and its writes of the same rows again are
-- saved; steps_ready_written is queued instead and turns the setting off
-- when the statement ends, before any other statement runs. Every other
-- writer of steps (operators, budgets, maps, decisions, the reaper's
-- look, one outcome at a time) never turns it on, and its ready rows are
-- kept by the trigger as before. An error undoes the setting with the
-- statement (or with its savepoint).
CREATE FUNCTION tasker_ready_written_off() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('tasker.ready_written', 'off', true);
  RETURN NULL;
END $$;

DROP TRIGGER steps_ready_updated ON steps;
CREATE TRIGGER steps_ready_updated AFTER UPDATE ON steps
  REFERENCING OLD TABLE AS old_steps NEW TABLE AS new_steps FOR EACH STATEMENT
  WHEN (current_setting('tasker.ready_written', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION tasker_ready_updated();
CREATE TRIGGER steps_ready_written AFTER UPDATE ON steps FOR EACH STATEMENT
  WHEN (current_setting('tasker.ready_written', true) = 'on')
  EXECUTE FUNCTION tasker_ready_written_off();
