/* tasker: retry budgets (DESIGN §14).
 *
 * A budget bounds the extra load that retries may add to one downstream,
 * as gRPC retry throttling and Finagle's RetryBudget do: over a sliding
 * window, retries may spend at most `ratio` of the first attempts seen in
 * it, plus `min_per_second` (a floor, so that a quiet downstream can still
 * be retried). A retry over budget is deferred, not failed: the budget says
 * the earliest time at which it would be allowed. First attempts are never
 * refused.
 *
 * The rule. Time is cut into slots of window_ms / TK_RETRY_BUDGET_SLOTS
 * milliseconds, counted from time 0 of the caller's clock. At time t the
 * window holds the slot containing t and the SLOTS - 1 before it. A retry
 * at t is allowed when
 *
 *     retries in the window + 1  <=  ratio * first attempts in the window
 *                                    + min_per_second * window_ms / 1000
 *
 * ratio and min_per_second are held in millionths, so the comparison is
 * exact integer arithmetic (0.1 * 10 first attempts is exactly 1 retry).
 * Memory is a fixed ring of SLOTS counters inside the struct; no call
 * allocates, and each is O(1) amortised: advancing the ring touches each
 * slot once, and a refusal compares at most SLOTS of them to find when it
 * ends (bench/bench_budget.c: a few ns to admit, tens to refuse).
 *
 * Threads. A budget is not thread-safe: one thread owns it (the engine's
 * loop thread). Code that shares one across threads must hold its own lock
 * around every call.
 *
 * Time. `now_ms` is the caller's clock (tk_clock, ms). A time earlier than
 * the latest one seen counts in the latest slot: the ring never moves back,
 * so a clock that steps back cannot resurrect expired counts.
 *
 * Reservations. A caller that cannot ask again when the time comes (the
 * engine writes a deferred retry's run_at to the store and forgets it)
 * reserves instead (tk_retry_budget_reserve): a refused retry is counted
 * at the future time it is given, so the next refusal sees it and gets a
 * later time, and deferred retries never go out together over the budget.
 * Reserved retries are served first come, first served: while one is
 * reserved after now, no retry is allowed now, and a new one is placed at
 * or after the latest reservation. The rule above then holds at the time
 * of every retry, counting each reserved one in the slot it was given. A
 * reservation counts only first attempts recorded before it was made:
 * those recorded later make room for later retries, and move a reserved
 * one earlier only when the caller asks (tk_retry_budget_promote). Memory
 * stays fixed: the reservations are kept for the one window that ends at
 * the latest of them, which is all any later answer reads (budget.c).
 *
 * Sharing. A budget's whole state is a fixed-size value: tk_retry_budget_save
 * writes it as TK_RETRY_BUDGET_STATE_SIZE bytes (one layout on every
 * machine) and tk_retry_budget_load reads it back, so that orchestrators
 * sharing a store keep one state there and apply these same functions to
 * it in turn (src/engine/budgets.c).
 */
#ifndef TASKER_BUDGET_H
#define TASKER_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Slots per window: the window slides in steps of window_ms / 100, so a
 * deferred retry's time is exact to that step (100 ms for a 10 s window). */
#define TK_RETRY_BUDGET_SLOTS 100

/* What a budget allows; the shape a `[budgets.NAME]` table maps onto. */
typedef struct tk_retry_budget_config {
  double ratio;          /* retries per first attempt in the window; 0..1000 */
  int64_t window_ms;     /* a multiple of TK_RETRY_BUDGET_SLOTS ms, up to 1 day */
  double min_per_second; /* the floor, 0..1000000; with the window it must
                            allow at least one retry per window */
} tk_retry_budget_config;

/* One budget. Fields are readable (the counters are for metrics and
 * tests); change them only through the functions below.
 *
 * The ring holds, per slot, a running balance in millionths of a retry: a
 * first attempt adds ratio_ppm, a retry takes 1000000. The balance of the
 * window is then sum[newest] - base, where base is the sum at the end of
 * the last slot that left; so a check is one subtraction, and finding when
 * a refused retry fits is one comparison per slot (see budget.c). */
typedef struct tk_retry_budget {
  int64_t slot_ms;   /* window_ms / TK_RETRY_BUDGET_SLOTS */
  int64_t ratio_ppm; /* ratio in millionths of a retry per first attempt */
  int64_t floor_ppm; /* min_per_second * window, in millionths of a retry */
  int64_t cur;       /* absolute index of the newest slot */
  int started;       /* 0 until the first call sets cur */
  int head;          /* ring position of slot `cur` */
  int64_t base;      /* running balance before the window's oldest slot */
  int64_t sum[TK_RETRY_BUDGET_SLOTS]; /* running balance at each slot's end */
  /* Reservations (tk_retry_budget_reserve). resv[] holds, for each slot of
   * the window that ends at the latest reservation's slot resv_last (at
   * position slot mod SLOTS), how many reservations were made at or before
   * that slot since init; resv_base the same for the slot before that
   * window; resv_total all of them. */
  int resv_started; /* 0 until the first reservation (again once none is live) */
  int64_t resv_last;
  int64_t resv_base, resv_total;
  int64_t resv[TK_RETRY_BUDGET_SLOTS];
  int64_t resv_live; /* reservations neither settled nor brought earlier */
  /* Counts each time the books of reservations start over (the first
   * reservation after none was live, or after the latest one left the
   * window: tk_retry_budget_settle below). A caller that keeps
   * reservations notes it with each; one of an older epoch is gone from
   * the books and must not be settled or promoted. */
  int64_t resv_epoch;
  /* Since init: first attempts recorded, retries allowed (now or reserved),
   * retries refused (by try) or deferred (reserved for later), reserved
   * retries brought earlier (tk_retry_budget_promote). */
  uint64_t total_firsts, total_retries, total_deferred, total_promoted;
} tk_retry_budget;

/* Check the ranges stated on the fields; 0, or TK_ERANGE with a message
 * naming the field, its value and what is allowed. */
int tk_retry_budget_config_validate(const tk_retry_budget_config *c, tk_err *err);

/* Start an empty budget under `c` (copied; c may go away). Returns 0 or the
 * validation error; *b is untouched on error. */
int tk_retry_budget_init(tk_retry_budget *b, const tk_retry_budget_config *c, tk_err *err);

/* Record a first attempt made at now_ms: it adds `ratio` to what retries
 * may spend for one window. Never refused, never fails. */
void tk_retry_budget_first(tk_retry_budget *b, int64_t now_ms);

/* How many retries would be allowed at now_ms if asked one after another
 * (0 when over budget, or while a reservation waits for a later time): a
 * gauge for metrics. Moves the window to now_ms but spends nothing. */
int64_t tk_retry_budget_available(tk_retry_budget *b, int64_t now_ms);

/* Try to spend one retry at now_ms. Returns 1 when allowed (the retry is
 * counted and *allowed_at_ms is now_ms), or 0 when over budget: nothing is
 * counted (total_deferred aside) and *allowed_at_ms is the earliest time,
 * on the same clock and > now_ms, at which this call would return 1 if
 * nothing else were recorded before then: the slot boundary where enough
 * old counts have left the window, at most one window after the latest
 * time seen or the latest reservation, whichever is later (the floor alone
 * then allows a retry). First attempts recorded meanwhile can only bring
 * that time earlier, retries spent meanwhile only later: a deferred retry
 * asks again at that time. */
int tk_retry_budget_try(tk_retry_budget *b, int64_t now_ms, int64_t *allowed_at_ms);

/* Spend one retry at now_ms if allowed, as tk_retry_budget_try does
 * (returns 1, *at_ms = now_ms); otherwise reserve it (returns 0): the
 * retry is counted at *at_ms, the time tk_retry_budget_try would have
 * given (> now_ms, a slot boundary), and the caller must not ask again for
 * it. Never fails. Each reservation makes the next one's time the same or
 * later, so retries deferred one after another are spread over time as the
 * budget allows instead of all going at once (see Reservations above). */
int tk_retry_budget_reserve(tk_retry_budget *b, int64_t now_ms, int64_t *at_ms);

/* Bringing reserved retries earlier. A caller that keeps its reservations
 * in order (first come, first served, as reserve gives them) may move the
 * earliest one to now when first attempts recorded since have made room:
 * the queue then drains at the rate the budget has as it drains, not the
 * one it had when the retries were reserved.
 *
 * tk_retry_budget_settle: the reservation given at_ms (<= now_ms) has come
 * due; it counts from now on as a retry spent at at_ms. Changes no answer
 * by itself; a caller that promotes must settle every reservation when its
 * time comes, before the next promote. Once the latest reservation has
 * left the window, the books of reservations start over (resv_epoch moves
 * on): those no caller settled (one that stopped, when callers share a
 * state) lie before every window an answer reads, so they change none.
 *
 * tk_retry_budget_promote: if one more retry fits at now_ms, with every
 * retry spent and every reservation counted, move the earliest reservation
 * (at_ms > now_ms, its time) to now_ms and return 1: the caller runs that
 * retry now. Otherwise return 0 and change nothing but the window's
 * position. The rule of the budget still holds at the time of every retry,
 * each counted where it now is. */
void tk_retry_budget_settle(tk_retry_budget *b, int64_t now_ms, int64_t at_ms);
int tk_retry_budget_promote(tk_retry_budget *b, int64_t now_ms, int64_t at_ms);

/* The size of a saved state: a version word, the window's figures, both
 * rings and the counters, each an int64 in little-endian order. */
#define TK_RETRY_BUDGET_STATE_SIZE (8 * (14 + 2 * TK_RETRY_BUDGET_SLOTS + 4))

/* Write b's whole state to out (TK_RETRY_BUDGET_STATE_SIZE bytes). */
void tk_retry_budget_save(const tk_retry_budget *b, unsigned char *out);

/* Read a state that tk_retry_budget_save wrote into *b, under config c
 * (validated: tk_retry_budget_init's rule): returns 1 when it was read, or
 * 0 when b starts empty instead: len is 0 (none saved yet), not a saved
 * state of this layout, or saved under another window (its slots would
 * mean other times). A state saved under another ratio or floor keeps
 * its counts and takes c's ratio and floor from now on. */
int tk_retry_budget_load(tk_retry_budget *b, const tk_retry_budget_config *c,
                         const unsigned char *in, size_t len);

/* The configuration a saved state was last written under (its window,
 * ratio and floor, as init rounded them): 1 and *c set, or 0 when in is
 * not a saved state of this layout (c untouched). A reader that has no
 * configuration of its own loads the state under this one. */
int tk_retry_budget_saved_config(const unsigned char *in, size_t len, tk_retry_budget_config *c);

#ifdef __cplusplus
}
#endif
#endif
