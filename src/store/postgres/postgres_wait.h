/* Wait steps and signals on PostgreSQL (postgres_wait.c; store.h, ops 15). */
#ifndef TASKER_STORE_POSTGRES_WAIT_H
#define TASKER_STORE_POSTGRES_WAIT_H

#include "store/store.h"

int tk__pg_signal_put(tk_store *s, const tk__signal_req *q, tk__signal_ans *out, tk_err *err);
int tk__pg_step_wait(tk_store *s, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err);
int tk__pg_wait_take(tk_store *s, int64_t now, const char *owner, int64_t lease_ms, int limit,
                     tk__waited *out, int *n, int64_t *next_at, tk_err *err);

/* Callbacks of http steps (postgres_callbacks.c; store.h, ops 17). */
int tk__pg_callback_arm(tk_store *s, const tk__callback_arm *a, tk_err *err);
int tk__pg_callback_put(tk_store *s, const tk__callback_req *r, tk__callback_ans *out,
                        tk_err *err);
int tk__pg_callback_extend(tk_store *s, const tk__callback_req *r, int64_t extend_ms,
                           tk__callback_ans *out, tk_err *err);

/* postgres_wait.c's statement helpers, for postgres_callbacks.c: one
 * statement sent on its own (*out its result when not NULL: PQclear it);
 * BEGIN on a usable connection; COMMIT after rc == 0 (NOTIFY first when
 * notify), else ROLLBACK, returning rc. */
struct tk__pg;
struct pg_result;
int tk__pg_wait_exec(struct tk__pg *pg, const char *sql, int n, const char *const *v,
                     struct pg_result **out, const char *what, tk_err *err);
int tk__pg_wait_begin(struct tk__pg *pg, const char *what, tk_err *err);
/* What a wait transaction's COMMIT notifies: nothing, a change, or a
 * signal stored (a wait's news: drain_changes, TK__PG_WAIT_NEWS). */
enum { TK__PG_NOTIFY_NONE, TK__PG_NOTIFY_CHANGE, TK__PG_NOTIFY_SIGNAL };
int tk__pg_wait_end(struct tk__pg *pg, int rc, int notify, const char *what, tk_err *err);
/* A signal from columns col.. of row (id, data, error, key, created_at,
 * final, retry_after_ms, source) into *s, for postgres_claim.c's expired
 * too; TK_ENOMEM (s freed) when a copy fails. */
int tk__pg_signal_columns(const struct pg_result *r, int row, int col, tk__signal_rec *s,
                          tk_err *err);

#endif
