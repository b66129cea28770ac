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

/* Bytes of a saved row: the budget's state, then the owners' books. */
#define TK__BUDGET_ROW_SIZE (TK_RETRY_BUDGET_STATE_SIZE + 8 * (2 + 2 * TK__BUDGET_OWNERS))

typedef struct tk__budget_row {
  tk_retry_budget b;
  /* Live reservations per orchestrator (owner 0: a free entry), for the
   * books of epoch `epoch` of b; reservations of orchestrators the table
   * had no room for count in unowned. */
  int64_t epoch, unowned;
  struct {
    uint64_t owner;
    int64_t live;
  } owners[TK__BUDGET_OWNERS];
} tk__budget_row;

/* Read a row that tk__budget_row_save wrote (len bytes; 0: none yet) under
 * config c; one of another layout or window starts empty. */
void tk__budget_row_load(tk__budget_row *r, const tk_retry_budget_config *c,
                         const unsigned char *in, size_t len);
/* Write r (TK__BUDGET_ROW_SIZE bytes). */
void tk__budget_row_save(const tk__budget_row *r, unsigned char *out);

/* After any call on r->b: the owners' books follow b's (empty once b's
 * books of reservations started over). */
void tk__budget_row_sync(tk__budget_row *r);
/* One live reservation more (+1) or fewer (-1) of `owner`. */
void tk__budget_row_count(tk__budget_row *r, uint64_t owner, int delta);
/* Whether every live reservation of the budget is `owner`'s: then its own
 * queue, first come first served, is the whole budget's, and it may
 * bring the earliest earlier (tk_retry_budget_promote). */
int tk__budget_row_sole(const tk__budget_row *r, uint64_t owner);

#endif
