/* A retry budget's state as the store keeps it (DESIGN §14; store.h:
 * budget_update): the budget (tk_retry_budget, src/retry/budget.c) and who
 * holds its reservations, so that the orchestrators sharing a store apply
 * their first attempts, retries and reservations to one state in turn. */
#ifndef TASKER_ENGINE_BUDGET_ROW_H
#define TASKER_ENGINE_BUDGET_ROW_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/budget.h>

/* Orchestrators whose live reservations a row tells apart; more at once
 * count together as `unowned`. */
#define TK__BUDGET_OWNERS 16

/* Bytes of a saved row: the budget's state, then the owners' books (each
 * owner's id, live count and earliest live reservation). A row of the
 * layout before the earliest reservations (TK__BUDGET_ROW_SIZE_2) loads
 * with them not known. */
#define TK__BUDGET_ROW_SIZE (TK_RETRY_BUDGET_STATE_SIZE + 8 * (2 + 3 * TK__BUDGET_OWNERS))
#define TK__BUDGET_ROW_SIZE_2 (TK_RETRY_BUDGET_STATE_SIZE + 8 * (2 + 2 * TK__BUDGET_OWNERS))

typedef struct tk__budget_row {
  tk_retry_budget b;
  /* Live reservations per orchestrator (owner 0: a free entry), for the
   * books of epoch `epoch` of b; reservations of orchestrators the table
   * had no room for count in unowned. */
  int64_t epoch, unowned;
  struct {
    uint64_t owner;
    int64_t live;
    int64_t first; /* the time of its earliest live reservation; 0: not known */
  } owners[TK__BUDGET_OWNERS];
} tk__budget_row;

/* Read a row that tk__budget_row_save wrote (len bytes; 0: none yet) under
 * config c; one of another layout or window starts empty (one of
 * TK__BUDGET_ROW_SIZE_2 bytes loads, its owners' earliest not known). */
void tk__budget_row_load(tk__budget_row *r, const tk_retry_budget_config *c,
                         const unsigned char *in, size_t len);
/* Write r (TK__BUDGET_ROW_SIZE bytes). */
void tk__budget_row_save(const tk__budget_row *r, unsigned char *out);

/* After any call on r->b: the owners' books follow b's (empty once b's
 * books of reservations started over). */
void tk__budget_row_sync(tk__budget_row *r);
/* One live reservation more (+1, reserved at at_ms) or fewer (-1) of
 * `owner`. Reservations come in time order, so one more is its earliest
 * only when it held none; one fewer leaves its earliest to be told again
 * (tk__budget_row_first). */
void tk__budget_row_count(tk__budget_row *r, uint64_t owner, int delta, int64_t at_ms);
/* Owner's earliest live reservation is now at at_ms (0: not known), as
 * its own queue says after it settled or brought earlier its oldest. */
void tk__budget_row_first(tk__budget_row *r, uint64_t owner, int64_t at_ms);
/* Whether owner may bring its reservation at at_ms (its earliest live
 * one) earlier: no other orchestrator's live reservation lies before it
 * (nor is one not known: one whose earliest is not known, or more
 * orchestrators than the books hold). The budget's queue is then served
 * first come first served (tk_retry_budget_promote moves the earliest
 * reservation), whoever holds the later ones. */
int tk__budget_row_may_promote(const tk__budget_row *r, uint64_t owner, int64_t at_ms);

#endif
