/* Steps run by outside workers (DESIGN §19, issue 23): the engine's side
 * of the worker protocol. `tasker serve` holds one tk_engine (its own
 * orchestrator id, no handler threads) and serves the HTTP protocol
 * through these calls, so a worker's claims and outcomes go through the
 * same claim, fence, backoff, budgets, events and metrics as any step's.
 *
 * All calls are made on the engine's owner thread (the server's thread);
 * none blocks longer than one store transaction.
 *
 * CONTRACT FILE written by the lead for session 29: h-wstore implements
 * it (src/engine/remote.h + src/engine/remote.c), h-wserve calls it.
 * Change it only together, and say so in both reports. */
#ifndef TASKER_ENGINE_REMOTE_H
#define TASKER_ENGINE_REMOTE_H

#include <stdint.h>

#include <jansson.h>

#include <tasker/engine.h>
#include <tasker/error.h>

/* Longest claim token, without its NUL: URL-safe base64 of the claim id
 * (8 bytes) and a random secret (16 bytes): 32 characters. */
#define TK__CLAIM_TOKEN_MAX 64

/* One step handed to an outside worker. (The type is tk__remote_claimed:
 * C has one namespace for typedefs and functions, and tk__remote_claim is
 * the call.) */
typedef struct tk__remote_claim {
  char token[TK__CLAIM_TOKEN_MAX + 1]; /* opaque, URL-safe; shown only to the worker */
  int64_t task_id;
  char *step;              /* "resize", or "resize[3]" for an instance of a map */
  int attempt;             /* 1 for the first */
  int64_t lease_expires_at; /* unix ms: heartbeat before this */
  int64_t heartbeat_ms;    /* the step's heartbeat interval */
  /* {"context": {...}, "parents": {"name": results, ...}, "item": ...}
   * ("item" only for an instance of a map): the same input a command or
   * http step gets. Owned by the claim. */
  json_t *input;
} tk__remote_claimed;

/* What an outcome did to its step. */
typedef struct tk__remote_result {
  const char *state;  /* "complete", "waiting_for_retry" or "error" (static) */
  int64_t run_at;     /* waiting_for_retry: when the retry is due (unix ms); else 0 */
} tk__remote_result;

/* Claim up to max (1..100) ready steps of the worker queue `queue` for the
 * worker named `worker` (shown in events and the attempt row as its
 * owner, "WORKER@queue" or as the implementer documents). Only steps whose
 * handler is { kind = "worker", queue = QUEUE } are ever claimed here, and
 * such steps are never claimed by an orchestrator's ordinary claim.
 * Leases that expired by now (any step's) are reaped first, as an
 * orchestrator's pass does, so a server without orchestrators still
 * retries the steps of workers that died.
 * *n = 0 when none is ready (not an error). Free with tk__remote_claims_free.
 * *next_due_at (may be NULL): when a claim of this queue may find more
 * without a change some writer signals (the store's tk__claim_request
 * next_due_at: unix ms; INT64_MAX: not before a signal; INT64_MIN:
 * unknown, look again soon). */
int tk__remote_claim(tk_engine *e, const char *queue, const char *worker, int max,
                     tk__remote_claimed *out, int *n, int64_t *next_due_at, tk_err *err);
void tk__remote_claims_free(tk__remote_claimed *c, int n);

/* Extend the claim's lease by the step's lease_ms from now. TK_EINVAL: not
 * a token (malformed); TK_EFENCED: the claim no longer holds its step
 * (lease expired and reaped, finished, cancelled), counted as a fenced
 * write; the message says which where the store knows. */
int tk__remote_heartbeat(tk_engine *e, const char *token, int64_t *lease_expires_at,
                         tk_err *err);

/* Record success with results (JSON text of any JSON value; NULL: null).
 * Same errors as heartbeat; the outcome is recorded exactly as a handler's
 * success (children released, task finished, events, metrics). */
int tk__remote_complete(tk_engine *e, const char *token, const char *results,
                        tk__remote_result *out, tk_err *err);

/* Record a failure. retryable = 0: the step fails now (a permanent
 * failure). retry_after_ms >= 0: a server-requested delay, applied under
 * the step's policy exactly as an http step's Retry-After (source
 * "retry_after" in events); -1: none. */
int tk__remote_fail(tk_engine *e, const char *token, const char *error, int retryable,
                    int64_t retry_after_ms, tk__remote_result *out, tk_err *err);

/* One outcome of a group (tk__remote_record): a complete (failed = 0,
 * results as for tk__remote_complete) or a fail (failed = 1, the rest as
 * tk__remote_fail's). result and err are set for each. */
typedef struct tk__remote_outcome {
  const char *token;
  int failed;
  const char *results;
  const char *error;
  int retryable;
  int64_t retry_after_ms;
  tk__remote_result result; /* out, when err.code is 0 */
  tk_err err;               /* out: 0, or as tk__remote_complete's and _fail's errors */
} tk__remote_outcome;

/* Record the outcomes o[0..n) as tk__remote_complete and tk__remote_fail
 * would one by one, but in one store transaction (group commit: one
 * tk__engine_finish of all of them), each still fenced by its own token
 * and answered in o[i].err and o[i].result: a stale token is TK_EFENCED and
 * changes nothing, the others are recorded. Two outcomes of one claim are
 * recorded one after the other (the second is then fenced). */
void tk__remote_record(tk_engine *e, tk__remote_outcome *o, int n);

/* tk__remote_record of o[0..n) (n may be 0), then tk__remote_claim of up
 * to max steps of `queue` for `worker`, the claim in the same store
 * transaction as the outcomes (a worker that reports and claims in one
 * request pays for one commit; steps its outcomes made ready may be
 * claimed at once). The return value and *out, *nout, *next_due_at are
 * the claim's, as tk__remote_claim's; each outcome's answer is in o[i]
 * whatever the claim did. A claim refused for its arguments records no
 * outcome (each o[i].err says so). */
int tk__remote_record_claim(tk_engine *e, tk__remote_outcome *o, int n, const char *queue,
                            const char *worker, int max, tk__remote_claimed *out, int *nout,
                            int64_t *next_due_at, tk_err *err);

/* Record that `worker` claimed from `queue` at the engine's now (the
 * store's worker_seen, for `tasker queues`' workers seen in the last
 * minute; the caller calls it at most every few seconds per pair). A store
 * without the op records nothing (0). */
int tk__remote_seen(tk_engine *e, const char *queue, const char *worker, tk_err *err);

/* A descriptor that becomes readable when steps may have become ready
 * (PostgreSQL: the LISTEN connection's socket; SQLite: the store's change
 * fd), for the server's long-poll; -1 when the store has none (then the
 * server polls). After it fires, call tk__remote_drain before claiming. */
int tk__remote_wake_fd(tk_engine *e);
void tk__remote_drain(tk_engine *e);

/* When the earliest lease this engine knows of runs out (engine clock, unix
 * ms; INT64_MIN: not known yet, so from the start the server looks at once
 * and learns the store's next expiry; INT64_MAX: none), so that a server
 * reaps expired leases on time, not only when a claim comes: no
 * orchestrator may be running (the workers of a server that stopped hold
 * leases too), and on PostgreSQL a worker's claim wakes none. tk__remote_reap reaps the leases expired by now, if that time has
 * come (an error is logged), and returns how many it reaped. */
int64_t tk__remote_reap_at(tk_engine *e);
int tk__remote_reap(tk_engine *e);

#endif
