-- Every move of a task and of its steps, one row each, with PostgreSQL's
-- columns and meaning (its 0012_moves_view.sql, where moves that an
-- attempt row or a tasks row records are derived): the readers that both
-- backends share (src/store/list_sql.c's step list, prune's dry-run count)
-- select from it, with the same SQL. Here every move is a transitions row,
-- so the view is that table with the id as seq, and the step's name and,
-- for an instance of a map step, its map's idx. Those two are subqueries,
-- not a join: a reader that does not name them reads no steps row
-- (SQLite keeps a LEFT JOIN that nothing reads).
CREATE VIEW moves AS
SELECT t.id AS seq, t.task_id, t.step_id, t.from_state, t.to_state, t.at, t.reason,
       t.attempt, (SELECT s.name FROM steps s WHERE s.id = t.step_id) AS step,
       (SELECT s.map_idx FROM steps s WHERE s.id = t.step_id) AS map_idx
  FROM transitions t;
