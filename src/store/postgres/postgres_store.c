/* The PostgreSQL backend: the connection, migrations, the server's clock,
 * change notices (LISTEN/NOTIFY), and the table of operations. */
#include "store/postgres/postgres_internal.h"
#include "store/postgres/postgres_wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "store/migration.h"

/* Held by `migrate` for its transaction: two `tasker init` at once apply
 * the migrations once, the second seeing the first's result. ("tasker" in
 * ASCII.) */
#define MIGRATE_LOCK_KEY "127978883442034"

/* libpq prints notices (CREATE ... IF NOT EXISTS skipping) on stderr by
 * default; the library never prints. */
static void quiet(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

/* The reason a connection failed, from libpq's message: its first line,
 * without the "connection to server ... failed: " and "FATAL:" that the
 * address and the code already say, and lower-cased at the start as the
 * rest of a sentence ("connection refused"). */
static void connect_reason(char *dst, size_t cap, const char *msg) {
  if (msg == NULL || *msg == '\0') msg = "unknown error";
  size_t n = strcspn(msg, "\n");
  char line[TK_ERR_MSG_MAX];
  if (n >= sizeof line) n = sizeof line - 1;
  memcpy(line, msg, n);
  line[n] = '\0';
  const char *r = line, *cut;
  while ((cut = strstr(r, " failed: ")) != NULL) r = cut + strlen(" failed: ");
  if (strncmp(r, "FATAL:", 6) == 0 || strncmp(r, "ERROR:", 6) == 0) r += 6;
  while (*r == ' ') r++;
  snprintf(dst, cap, "%s", r);
  if (dst[0] >= 'A' && dst[0] <= 'Z' && dst[1] >= 'a' && dst[1] <= 'z') dst[0] += 'a' - 'A';
}

/* ONE line naming the address tried and why it failed. */
static int cannot_connect(tk__pg *pg, int code, tk_err *err) {
  char reason[TK_ERR_MSG_MAX];
  connect_reason(reason, sizeof reason, PQerrorMessage(pg->conn));
  const char *host = PQhost(pg->conn), *port = PQport(pg->conn), *db = PQdb(pg->conn);
  return tk_err_set(err, code, "cannot connect to PostgreSQL at %s:%s (database \"%s\"): %s",
                    host && *host ? host : "localhost", port && *port ? port : "5432",
                    db ? db : "", reason);
}

static void pg_close(tk_store *s) {
  tk__pg *pg = (tk__pg *)s;
  if (pg == NULL) return;
  if (pg->epoll_fd >= 0) close(pg->epoll_fd);
  if (pg->event_fd >= 0) close(pg->event_fd);
  tk__pg_flows_free(pg);
  PQfinish(pg->conn);
  free(pg);
}

/* The result r of a command run outside a pipeline: 0 (r into *res, or
 * cleared), or TK_ESTORE naming `what` with the server's first line
 * (TK_EDISCONNECTED when the session is gone). */
static int checked(tk__pg *pg, PGresult *r, const char *what, PGresult **res, tk_err *err) {
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char line[TK_ERR_MSG_MAX];
    snprintf(line, sizeof line, "%s", msg ? msg : PQerrorMessage(pg->conn));
    line[strcspn(line, "\n")] = '\0';
    PQclear(r);
    if (PQstatus(pg->conn) != CONNECTION_OK)
      return tk_err_set(err, TK_EDISCONNECTED, "postgres: %s: connection lost: %s", what, line);
    return tk_err_set(err, TK_ESTORE, "postgres: %s: %s", what, line);
  }
  if (res) *res = r;
  else PQclear(r);
  return 0;
}

/* Run one command (or several, with no parameters) outside a pipeline. */
static int exec_simple(tk__pg *pg, const char *sql, const char *what, PGresult **res,
                       tk_err *err) {
  return checked(pg, PQexec(pg->conn, sql), what, res, err);
}

/* Settings of every session. The orchestrator's statements all reach rows
 * by key, and they are prepared once per connection: a generic plan made
 * while a table was still small (a fresh store) would otherwise keep
 * scanning it whole as it grows, until the next ANALYZE replans it. So
 * sequential scans are left to the reports, which turn them back on for
 * their own transactions. */
static int session_setup(tk__pg *pg, tk_err *err) {
  /* No JIT either: a plan that must scan a small table whole (the
   * queues') carries the disabled scan's cost of 10^10, far past
   * jit_above_cost, and was compiled at every execution: seconds for a
   * claim's look at its lanes. */
  int rc = exec_simple(pg, "SET enable_seqscan = off; SET jit = off", "session", NULL, err);
  return rc == 0 && pg->sync_off ? tk__pg_durability_apply(pg, err) : rc;
}

/* `location` is the whole URL (postgres://..., postgresql://...) or a
 * keyword/value string (host=... dbname=...), optionally after a
 * "postgres:" or "postgresql:" scheme; libpq's PG* environment variables
 * fill in what it leaves out. */
static const char *conninfo_of(const char *location) {
  static const char *const schemes[] = {"postgresql:", "postgres:"};
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
    size_t n = strlen(schemes[i]);
    if (strncmp(location, schemes[i], n) == 0 && strncmp(location + n, "//", 2) != 0)
      return location + n;
  }
  return location;
}

/* opts->create is not ours to honour: a database is its administrator's. */
static int pg_open(const char *location, const tk_store_open_options *opts, tk_store **out,
                   tk_err *err) {
  (void)opts;
  *out = NULL;
  if (location == NULL) location = "";
  tk__pg *pg = calloc(1, sizeof *pg);
  if (pg == NULL) return tk__pg_oom(err, "open");
  pg->base.ops = &tk__postgres_store_ops;
  pg->base.clock = tk_clock_system(); /* until the generic layer installs the store's */
  pg->epoll_fd = pg->event_fd = -1;
  /* expand_dbname: the dbname value may be a URL or a keyword/value
   * string; the fallback name shows in pg_stat_activity unless the URL
   * names one. */
  const char *const keys[] = {"fallback_application_name", "client_encoding", "dbname", NULL};
  const char *const values[] = {"tasker", "UTF8", conninfo_of(location), NULL};
  pg->conn = PQconnectdbParams(keys, values, 1);
  if (pg->conn == NULL) {
    free(pg);
    return tk__pg_oom(err, "open");
  }
  if (PQstatus(pg->conn) != CONNECTION_OK) {
    cannot_connect(pg, TK_ESTORE, err);
    pg_close(&pg->base);
    return TK_ESTORE;
  }
  PQsetNoticeProcessor(pg->conn, quiet, NULL);
  int rc = session_setup(pg, err);
  if (rc) {
    pg_close(&pg->base);
    return rc;
  }
  *out = &pg->base;
  return 0;
}

/* The highest migration applied, 0 when there is none (or no table yet). */
static int read_version(tk__pg *pg, int *version, tk_err *err) {
  PGresult *r = NULL;
  *version = 0;
  int rc = exec_simple(pg, "SELECT to_regclass('schema_migrations') IS NOT NULL", "schema version",
                       &r, err);
  if (rc) return rc;
  int exists = tk__pg_bool(r, 0, 0);
  PQclear(r);
  if (!exists) return 0;
  rc = exec_simple(pg, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                   "schema version", &r, err);
  if (rc) return rc;
  *version = (int)tk__pg_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

static int pg_schema_version(tk_store *s, int *version, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  int rc = tk__pg_usable(pg, "schema version", err);
  return rc ? rc : read_version(pg, version, err);
}

/* All missing migrations up to target in one transaction under an advisory
 * lock: either the schema moves to the target whole or not at all, and a
 * second migrator waits, then finds nothing left to do. */
static int pg_migrate(tk_store *s, int target, int *applied, int *version, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  int n = 0, v = 0, rc;
  if (applied) *applied = 0;
  if ((rc = tk__pg_usable(pg, "migrate", err))) return rc;
  if ((rc = exec_simple(pg, "BEGIN", "migrate", NULL, err))) return rc;
  if ((rc = exec_simple(pg, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")", "migrate", NULL,
                        err)) ||
      (rc = exec_simple(pg,
                        "CREATE TABLE IF NOT EXISTS schema_migrations ("
                        " version integer PRIMARY KEY, name text NOT NULL,"
                        " applied_at bigint NOT NULL)",
                        "migrate", NULL, err)) ||
      (rc = read_version(pg, &v, err)))
    goto fail;
  for (const tk__migration *m = tk__postgres_migrations; m->number != 0; m++) {
    if (m->number <= v || (target > 0 && m->number > target)) continue;
    char what[128];
    snprintf(what, sizeof what, "migration %04d_%s", m->number, m->name);
    if ((rc = exec_simple(pg, m->sql, what, NULL, err))) goto fail;
    char num[16];
    snprintf(num, sizeof num, "%d", m->number);
    const char *params[] = {num, m->name};
    /* applied_at is the server's clock: the store's own time. */
    if ((rc = checked(pg,
                      PQexecParams(pg->conn,
                                   "INSERT INTO schema_migrations (version, name, applied_at)"
                                   " VALUES ($1, $2, floor(extract(epoch FROM clock_timestamp())"
                                   " * 1000)::bigint)",
                                   2, NULL, params, NULL, NULL, 0),
                      what, NULL, err)))
      goto fail;
    n++;
  }
  if ((rc = exec_simple(pg, "COMMIT", "migrate", NULL, err))) goto fail;
  if (applied) *applied = n;
  if (version) return read_version(pg, version, err);
  return 0;
fail:
  PQclear(PQexec(pg->conn, "ROLLBACK"));
  return rc;
}

/* The server's clock in microseconds (its resolution), one round trip. */
static int pg_server_time(tk_store *s, int64_t *us, tk_err *err) {
  PGresult *r;
  int rc = tk__pg_query(s, PG_SERVER_TIME,
                        "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
                        NULL, "server time", &r, err);
  if (rc == 0) *us = tk__pg_i64(r, 0, 0);
  PQclear(r);
  return rc;
}

/* ---- Change notices ----
 * One connection both queries and listens. libpq queues a notification
 * that arrives while it reads query results, and then the socket has
 * nothing left to wake a poll. So the descriptor handed out is an epoll
 * set of the socket (notices that arrive while idle) and an eventfd that
 * change_fd raises when notices from other sessions are already queued
 * (this session's own NOTIFYs come back to it too, and are ignored, but
 * for a wait's news: take_notices). */

/* Make change_fd readable. */
static void wake(tk__pg *pg) {
  uint64_t one = 1;
  ssize_t w = write(pg->event_fd, &one, sizeof one);
  (void)w;
}

/* The notices queued, dropped: whether one should wake a sleep: one from
 * another session, or a wait's news (noted in pg->wait_news) from any,
 * this session's own too (a child task's end that it recorded stores its
 * parent's signal, and its trigger's notice comes back to this session
 * only as one of its own). */
static int take_notices(tk__pg *pg) {
  int wake_up = 0;
  PGnotify *n;
  while ((n = PQnotifies(pg->conn)) != NULL) {
    int news = strcmp(n->extra, TK__PG_WAIT_NEWS) == 0;
    if (news) pg->wait_news = 1;
    if (news || n->be_pid != PQbackendPID(pg->conn)) wake_up = 1;
    PQfreemem(n);
  }
  return wake_up;
}

static void raise_if_queued(tk__pg *pg) {
  if (take_notices(pg)) wake(pg);
}

static int pg_change_fd(tk_store *s) {
  tk__pg *pg = (tk__pg *)s;
  if (pg->epoll_fd < 0) {
    if (tk__pg_usable(pg, "listen", NULL) != 0 ||
        exec_simple(pg, "LISTEN " TK__PG_CHANNEL, "listen", NULL, NULL) != 0)
      return -1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event a = {.events = EPOLLIN}, b = {.events = EPOLLIN};
    a.data.fd = PQsocket(pg->conn);
    b.data.fd = ev;
    if (ep < 0 || ev < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, a.data.fd, &a) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, ev, &b) != 0) {
      if (ep >= 0) close(ep);
      if (ev >= 0) close(ev);
      return -1;
    }
    pg->epoll_fd = ep;
    pg->event_fd = ev;
  }
  raise_if_queued(pg);
  return pg->epoll_fd;
}

static int pg_drain_changes(tk_store *s) {
  tk__pg *pg = (tk__pg *)s;
  if (pg->epoll_fd < 0) return 0;
  /* Reads whatever arrived without blocking; then every queued notice is
   * dropped, and the "queued" flag with them. */
  PQconsumeInput(pg->conn);
  take_notices(pg);
  uint64_t count;
  ssize_t r = read(pg->event_fd, &count, sizeof count);
  (void)r;
  int news = pg->wait_news;
  pg->wait_news = 0;
  return news ? TK__CHANGED_WAITS : 0;
}

/* A new session in place of a lost one, set up as the old one was: its
 * prepared statements are made again on first use, LISTEN is sent again,
 * and a sleeper is woken once (a change may have gone unnoticed while the
 * connection was down). */
static int pg_reconnect(tk_store *s, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  PQreset(pg->conn);
  if (PQstatus(pg->conn) != CONNECTION_OK) return cannot_connect(pg, TK_EDISCONNECTED, err);
  memset(pg->prepared, 0, sizeof pg->prepared);
  int rc = session_setup(pg, err);
  if (rc) return PQstatus(pg->conn) == CONNECTION_OK ? rc : TK_EDISCONNECTED;
  if (pg->epoll_fd >= 0) { /* LISTEN was sent on the old session */
    rc = exec_simple(pg, "LISTEN " TK__PG_CHANNEL, "listen", NULL, err);
    if (rc) return PQstatus(pg->conn) == CONNECTION_OK ? rc : TK_EDISCONNECTED;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.fd = PQsocket(pg->conn);
    if (epoll_ctl(pg->epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0)
      epoll_ctl(pg->epoll_fd, EPOLL_CTL_MOD, ev.data.fd, &ev);
    wake(pg);
  }
  return 0;
}

const tk__store_ops tk__postgres_store_ops = {
    .version = TK__STORE_OPS_VERSION,
    .scheme = "postgres",
    .process_init = NULL,
    .open = pg_open,
    .close = pg_close,
    .migrate = pg_migrate,
    .schema_version = pg_schema_version,
    .server_time = pg_server_time,
    .template_put = tk__pg_template_put,
    .template_find = tk__pg_template_find,
    .template_get_by_id = tk__pg_template_get_by_id,
    .template_list = tk__pg_template_list,
    .task_create = tk__pg_task_create,
    .schedule_put = tk__pg_schedule_put,
    .schedule_list = tk__pg_schedule_list,
    .schedule_remove = tk__pg_schedule_remove,
    .schedule_fire = tk__pg_schedule_fire,
    .record = tk__pg_record,
    .heartbeat = tk__pg_heartbeat,
    .expired = tk__pg_expired,
    .next_due = tk__pg_next_due,
    .has_work = tk__pg_has_work,
    .inputs = tk__pg_inputs,
    .operator = tk__pg_operator,
    .task_report = tk__pg_task_report,
    .status = tk__pg_status,
    .change_fd = pg_change_fd,
    .drain_changes = pg_drain_changes,
    .items_load = tk__pg_items_load,
    .items_checkpoint = tk__pg_items_checkpoint,
    .reconnect = pg_reconnect,
    .task_list = tk__pg_task_list,
    .task_count = tk__pg_task_count,
    .step_list = tk__pg_step_list,
    .activity = tk__pg_activity,
    .prune = tk__pg_prune,
    .size = tk__pg_size,
    .durability = tk__pg_durability,
    .retry_earlier = tk__pg_retry_earlier,
    .instance_list = tk__pg_instance_list,
    .submit_many = tk__pg_submit_many,
    .claim_get = tk__pg_claim_get,
    .queue_put = tk__pg_queue_put,
    .queue_list = tk__pg_queue_list,
    .worker_seen = tk__pg_worker_seen,
    .budget_update = tk__pg_budget_update,
    .budget_list = tk__pg_budget_list,
    .signal_put = tk__pg_signal_put,
    .step_wait = tk__pg_step_wait,
    .wait_take = tk__pg_wait_take,
    .deadline_apply = tk__pg_deadline_apply,
    .callback_arm = tk__pg_callback_arm,
    .callback_put = tk__pg_callback_put,
    .callback_extend = tk__pg_callback_extend,
    .child_start = tk__pg_child_start,
    .task_family = tk__pg_task_family,
};
