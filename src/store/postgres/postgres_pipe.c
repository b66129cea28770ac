/* Pipelines: the statements of one transaction sent together and their
 * results read after one sync (libpq pipeline mode). Prepared statements
 * are prepared on first use inside the same pipeline, so preparing costs
 * no round trip of its own. */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of s into dst. */
static void first_line(char *dst, size_t cap, const char *s) {
  if (s == NULL || *s == '\0') s = "unknown error";
  size_t n = strcspn(s, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

/* Whether an error means the session is gone: the connection failed
 * (class 08), or the server is shutting down or not yet accepting
 * connections (57P01-57P03), which ends the session too. */
static int session_lost(const char *sqlstate) {
  return strncmp(sqlstate, "08", 2) == 0 || strcmp(sqlstate, "57P01") == 0 ||
         strcmp(sqlstate, "57P02") == 0 || strcmp(sqlstate, "57P03") == 0;
}

/* The connection must be there: a lost one is TK_EDISCONNECTED until the
 * caller reconnects (store.h: `reconnect`), never reset behind its back,
 * since the prepared statements and LISTEN of the old session are gone. */
int tk__pg_usable(tk__pg *pg, const char *what, tk_err *err) {
  if (PQstatus(pg->conn) != CONNECTION_OK) {
    char line[TK_ERR_MSG_MAX];
    first_line(line, sizeof line, PQerrorMessage(pg->conn));
    return tk_err_set(err, TK_EDISCONNECTED, "postgres: %s: connection lost: %s", what, line);
  }
  /* A transaction left open by an operation that could not finish it is
   * ended before anything else. */
  if (PQtransactionStatus(pg->conn) != PQTRANS_IDLE) PQclear(PQexec(pg->conn, "ROLLBACK"));
  return 0;
}

int tk__pg_pipe_begin(tk__pg *pg, tk__pg_pipe *p, const char *what, tk_err *err) {
  memset(p, 0, sizeof *p);
  p->pg = pg;
  p->failed = -1;
  int rc = tk__pg_usable(pg, what, err);
  if (rc) return rc;
  if (!PQenterPipelineMode(pg->conn)) {
    char line[TK_ERR_MSG_MAX];
    first_line(line, sizeof line, PQerrorMessage(pg->conn));
    return tk_err_set(err, TK_ESTORE, "postgres: %s: cannot enter pipeline mode: %s", what,
                      line);
  }
  p->active = 1;
  return 0;
}

/* Room for one more command; 0 when memory ran out. */
static int room(tk__pg_pipe *p) {
  if (p->n < p->cap) return 1;
  int cap = p->cap ? 2 * p->cap : 32;
  PGresult **res = realloc(p->res, (size_t)cap * sizeof *res);
  if (res == NULL) return 0;
  p->res = res;
  int *prep = realloc(p->prepare, (size_t)cap * sizeof *prep);
  if (prep == NULL) return 0;
  p->prepare = prep;
  int *slot = realloc(p->slot_of, (size_t)cap * sizeof *slot);
  if (slot == NULL) return 0;
  p->slot_of = slot;
  p->cap = cap;
  return 1;
}

int tk__pg_pipe_stmt(tk__pg_pipe *p, int id, const char *sql, int nparams,
                     const char *const *values) {
  if (p->broken) return -1;
  if (id < 0) { /* a one-off statement, planned for its values */
    if (!room(p) || !PQsendQueryParams(p->pg->conn, sql, nparams, NULL, values, NULL, NULL, 0)) {
      p->broken = 1;
      return -1;
    }
    p->res[p->n] = NULL;
    p->prepare[p->n] = 0;
    p->slot_of[p->n++] = p->nslots;
    return p->nslots++;
  }
  char name[16];
  snprintf(name, sizeof name, "tk%d", id);
  if (!p->pg->prepared[id]) {
    if (!room(p) || !PQsendPrepare(p->pg->conn, name, sql, nparams, NULL)) {
      p->broken = 1;
      return -1;
    }
    /* Taken as prepared from here on; a failed prepare is forgotten again
     * when its result is read (tk__pg_pipe_run). */
    p->pg->prepared[id] = 1;
    p->res[p->n] = NULL;
    p->prepare[p->n] = id + 1;
    p->slot_of[p->n++] = -1;
  }
  if (!room(p) ||
      !PQsendQueryPrepared(p->pg->conn, name, nparams, values, NULL, NULL, 0)) {
    p->broken = 1;
    return -1;
  }
  p->res[p->n] = NULL;
  p->prepare[p->n] = 0;
  p->slot_of[p->n++] = p->nslots;
  return p->nslots++;
}

PGresult *tk__pg_result(const tk__pg_pipe *p, int slot) {
  if (slot < 0) return NULL;
  /* A slot's command is at or after its number (prepares come between). */
  for (int c = slot; c < p->n; c++)
    if (p->slot_of[c] == slot) return p->res[c];
  return NULL;
}

/* Record the first failure: its slot, SQLSTATE and message. */
static void note_failure(tk__pg_pipe *p, int cmd, const PGresult *r) {
  if (p->failed != -1) return;
  /* A failed prepare is the failure of the query queued right after it. */
  if (p->prepare[cmd] && cmd + 1 < p->n) cmd++;
  p->failed = p->slot_of[cmd] >= 0 ? p->slot_of[cmd] : 0;
  const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  if (msg == NULL) msg = PQerrorMessage(p->pg->conn);
  first_line(p->error, sizeof p->error, msg);
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  snprintf(p->sqlstate, sizeof p->sqlstate, "%s", state ? state : "");
}

int tk__pg_pipe_run(tk__pg_pipe *p, const char *what, tk_err *err) {
  PGconn *conn = p->pg->conn;
  if (!p->broken && !PQpipelineSync(conn)) p->broken = 1;
  for (int c = 0; c < p->n && !p->broken; c++) {
    PGresult *r = PQgetResult(conn);
    if (r == NULL) { /* the connection failed */
      p->broken = 1;
      break;
    }
    ExecStatusType st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok) {
      if (st != PGRES_PIPELINE_ABORTED) note_failure(p, c, r);
      if (p->prepare[c]) p->pg->prepared[p->prepare[c] - 1] = 0;
      if (PQstatus(conn) != CONNECTION_OK) p->broken = 1;
    }
    if (ok && !p->prepare[c]) p->res[c] = r;
    else PQclear(r);
    /* Each command's results end with a NULL. */
    while ((r = PQgetResult(conn)) != NULL) PQclear(r);
  }
  if (!p->broken) {
    PGresult *r = PQgetResult(conn);
    if (r == NULL || PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
      p->broken = 1;
      /* The server's last word in place of the sync: the FATAL error of a
       * session ended after every statement ran, COMMIT perhaps included
       * (57P01: pg_terminate_backend). Its SQLSTATE says the session is
       * gone, which libpq does not know until it reads the end. */
      if (r != NULL && p->failed == -1) note_failure(p, p->n - 1, r);
    }
    PQclear(r);
  }
  if (p->broken) {
    /* Prepared statements sent but not confirmed are unknown: prepare
     * them again on the next use (a duplicate name is reset with the
     * session anyway when the connection is gone). */
    for (int c = 0; c < p->n; c++)
      if (p->prepare[c] && PQstatus(conn) != CONNECTION_OK) p->pg->prepared[p->prepare[c] - 1] = 0;
    if (p->failed == -1) { /* no result said why: the connection's message does */
      p->failed = 0;
      first_line(p->error, sizeof p->error, PQerrorMessage(conn));
    }
  }
  p->ran = p->n;
  if (p->failed == -1) return 0;
  /* A broken pipeline left the session's protocol state unknown: only a
   * new session (the caller's reconnect) is safe to use. */
  if (p->broken || session_lost(p->sqlstate) || PQstatus(conn) != CONNECTION_OK) {
    p->broken = 1;
    return tk_err_set(err, TK_EDISCONNECTED, "postgres: %s: connection lost: %s", what,
                      p->error);
  }
  return tk_err_set(err, TK_ESTORE, "postgres: %s: %s", what, p->error);
}

void tk__pg_pipe_reset(tk__pg_pipe *p) {
  for (int c = 0; c < p->n; c++) PQclear(p->res[c]);
  p->n = p->ran = 0;
  p->nslots = 0;
  p->failed = -1;
  p->error[0] = '\0';
  p->sqlstate[0] = '\0';
}

void tk__pg_pipe_end(tk__pg_pipe *p) {
  if (p->pg == NULL) return;
  if (p->active && p->n > p->ran && !p->broken) {
    /* Queued and never run (an early return): run them so the pipeline
     * can be left; an open transaction is rolled back below. */
    tk__pg_pipe_run(p, "discard", NULL);
  }
  tk__pg_pipe_reset(p);
  if (p->active && !PQexitPipelineMode(p->pg->conn)) {
    /* Results left unread: a connection that failed. */
    PGresult *r;
    while ((r = PQgetResult(p->pg->conn)) != NULL) PQclear(r);
    PQexitPipelineMode(p->pg->conn);
  }
  /* A transaction that a failure left open (in its failed state) ends
   * here, so the connection is idle for the next operation. */
  if (p->active && PQstatus(p->pg->conn) == CONNECTION_OK &&
      PQtransactionStatus(p->pg->conn) != PQTRANS_IDLE)
    PQclear(PQexec(p->pg->conn, "ROLLBACK"));
  free(p->res);
  free(p->prepare);
  free(p->slot_of);
  memset(p, 0, sizeof *p);
}
