-- Fewer index entries and key checks per task (issue 22 item 2), with no
-- change in what any reader sees: the same rows, looked up the same ways.
--
-- transitions: each transition was two b-tree inserts, transitions_pkey on
-- id and transitions_by_task on (task_id, id). Every reader goes by task
-- (a report's history, ordered by id; a step's last move in the lists; a
-- prune's delete) and none by id alone, so the key is (task_id, id) and
-- the second index goes: one b-tree insert per transition instead of two
-- (4 per single-step task). id stays unique by its sequence, and keeps its
-- sequence (transitions_id_seq). The key is built once here, over the
-- whole table.
ALTER TABLE transitions DROP CONSTRAINT transitions_pkey;
DROP INDEX transitions_by_task;
ALTER TABLE transitions ADD CONSTRAINT transitions_pkey PRIMARY KEY (task_id, id);

-- tasks.template_id: no foreign key. Its check, a lookup of the template
-- (and a share lock on its row) for every task inserted, was about half
-- of a bulk submit's insert time. A task's template_id is always one the
-- store has just handed out: every submit (single, bulk, a schedule's
-- slot) builds its task from the template it looked up by name
-- (tk__task_build), and templates are never deleted. steps (0007) and
-- attempts (0001) have no key to their parent for the same reason.
ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_template_id_fkey;

-- tasks.identity: unique only among tasks that have one. The constraint
-- indexed every task, NULLs included (a NULL never conflicts), so a task
-- without an identity, most of them, cost an entry at its insert and one
-- more at each of its updates that is not HOT (its finish is never:
-- tasks_finished changes). The partial index holds only the identities;
-- a lookup by identity (identity = $1) implies identity IS NOT NULL and
-- uses it, and ON CONFLICT names its predicate (postgres_tasks.c). Built
-- over rows already updated, it may serve lookups only once the
-- transactions older than this migration have ended (pg_index.
-- indcheckxmin; until then they scan); ON CONFLICT uses it at once.
CREATE UNIQUE INDEX tasks_identity ON tasks (identity) WHERE identity IS NOT NULL;
ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_identity_key;

-- tasks: 40% full when written (0001 had 70%). A task's start (pending to
-- in_progress: state, updated_at) changes no indexed column, and is HOT
-- only when its page has room for the new version; its finish changes
-- finished_at (tasks_finished) and is never HOT. At 70% a page of freshly
-- submitted tasks had room for about a third of their starts: 20% of
-- tasks' updates were HOT, and each other start wrote a new entry in
-- tasks_pkey and tasks_by_template (and a row lock and the version on
-- another page). At 40% every start is HOT. 20,000 single-step tasks
-- drained by 4 `tasker run`, run only, WAL per task (pg_waldump): at 70%
-- 32.2 records and 3,221 B, 21% of updates HOT; at 50% 31.0 and 3,138 B,
-- 47%; at 40% 30.7 and 3,119 B, 50% (every start); at 35% 30.5 and 3,097
-- B. The table had 626 pages after the run at 70% and 622 at 40%: the
-- starts that were not HOT moved their rows to new pages anyway. Pages
-- written before this migration keep their layout.
ALTER TABLE tasks SET (fillfactor = 40);
