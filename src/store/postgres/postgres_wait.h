/* Wait steps and signals on PostgreSQL (postgres_wait.c; store.h, ops 15). */
#ifndef TASKER_STORE_POSTGRES_WAIT_H
#define TASKER_STORE_POSTGRES_WAIT_H

#include "store/store.h"

int tk__pg_signal_put(tk_store *s, const tk__signal_req *q, tk__signal_ans *out, tk_err *err);
int tk__pg_step_wait(tk_store *s, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err);
int tk__pg_wait_take(tk_store *s, int64_t now, const char *owner, int64_t lease_ms, int limit,
                     tk__waited *out, int *n, int64_t *next_at, tk_err *err);

#endif
