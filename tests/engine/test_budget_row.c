/* A retry budget's row in the store (src/engine/budget_row.h): the
 * budget's state and the owners' books of live reservations, saved and
 * loaded as bytes; an orchestrator may bring its earliest deferred retry
 * earlier while no other holds an earlier live reservation (nor one not
 * known: a row of the older layout, more orchestrators than the table
 * holds); the books follow the budget's when they start over. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "engine/budget_row.h"

static const tk_retry_budget_config cfg = {0, 1000, 1}; /* 1 retry per 1 s window */

/* The row after one save and load, as the next orchestrator reads it. */
static tk__budget_row through_bytes(const tk__budget_row *r) {
  unsigned char bytes[TK__BUDGET_ROW_SIZE];
  tk__budget_row_save(r, bytes);
  tk__budget_row got;
  tk__budget_row_load(&got, &cfg, bytes, sizeof bytes);
  return got;
}

/* Reserve one retry at now for owner; 1 when it was reserved (not allowed at once). */
static int reserve(tk__budget_row *r, uint64_t owner, int64_t now, int64_t *at) {
  if (tk_retry_budget_reserve(&r->b, now, at)) return 0;
  tk__budget_row_sync(r);
  tk__budget_row_count(r, owner, +1, *at);
  return 1;
}

/* A (1) holds the earliest reservation, B (2) a later one: A may bring
 * its own earlier while B holds one, B not while A's comes first. */
static void the_earliest_holder_may_bring_earlier(void **state) {
  (void)state;
  tk__budget_row r;
  tk__budget_row_load(&r, &cfg, NULL, 0);
  int64_t at_a, at_b, at;
  assert_int_equal(reserve(&r, 1, 0, &at), 0); /* the floor's one, at once */
  assert_int_equal(reserve(&r, 1, 0, &at_a), 1);
  assert_int_equal(at_a, 1000);
  assert_int_equal(tk__budget_row_may_promote(&r, 1, at_a), 1);
  r = through_bytes(&r);
  assert_int_equal(reserve(&r, 2, 10, &at_b), 1);
  assert_int_equal(at_b, 2000);
  r = through_bytes(&r);
  assert_int_equal(tk__budget_row_may_promote(&r, 1, at_a), 1);
  assert_int_equal(tk__budget_row_may_promote(&r, 2, at_b), 0);
  /* A's comes due and A settles it: B's is the earliest. */
  tk_retry_budget_settle(&r.b, 1000, at_a);
  tk__budget_row_sync(&r);
  tk__budget_row_count(&r, 1, -1, 0);
  r = through_bytes(&r);
  assert_int_equal(tk__budget_row_may_promote(&r, 2, at_b), 1);
  assert_int_equal(r.b.resv_live, 1);
}

/* A later reservation of A's own: A tells the books its earliest moved
 * on, after B's; then B's comes first. */
static void an_owners_earliest_moves_on(void **state) {
  (void)state;
  tk__budget_row r;
  tk__budget_row_load(&r, &cfg, NULL, 0);
  int64_t at_a1, at_b, at_a2, at;
  reserve(&r, 1, 0, &at);
  assert_int_equal(reserve(&r, 1, 0, &at_a1), 1);
  assert_int_equal(reserve(&r, 2, 0, &at_b), 1);
  assert_int_equal(reserve(&r, 1, 0, &at_a2), 1);
  assert_true(at_a1 < at_b && at_b < at_a2);
  assert_int_equal(tk__budget_row_may_promote(&r, 2, at_b), 0);
  tk_retry_budget_settle(&r.b, at_a1, at_a1);
  tk__budget_row_sync(&r);
  tk__budget_row_count(&r, 1, -1, 0);
  tk__budget_row_first(&r, 1, at_a2);
  r = through_bytes(&r);
  assert_int_equal(tk__budget_row_may_promote(&r, 2, at_b), 1);
  assert_int_equal(tk__budget_row_may_promote(&r, 1, at_a2), 0);
}

/* A row saved before the earliest reservations were kept loads with them
 * not known: nobody passes another's reservation then. */
static void a_row_of_the_older_layout_passes_no_one(void **state) {
  (void)state;
  tk__budget_row r, got;
  tk__budget_row_load(&r, &cfg, NULL, 0);
  int64_t at_a, at_b, at;
  reserve(&r, 1, 0, &at);
  reserve(&r, 1, 0, &at_a);
  reserve(&r, 2, 10, &at_b);
  unsigned char bytes[TK__BUDGET_ROW_SIZE];
  tk__budget_row_save(&r, bytes);
  tk__budget_row_load(&got, &cfg, bytes, TK__BUDGET_ROW_SIZE_2); /* the older layout's bytes */
  assert_int_equal(got.b.resv_live, 2);
  assert_int_equal(got.owners[0].live, 1);
  assert_int_equal(tk__budget_row_may_promote(&got, 1, at_a), 0);
  assert_int_equal(tk__budget_row_may_promote(&got, 2, at_b), 0);
}

/* The books start over with the budget's (the latest reservation left
 * the window): the owners' too, whoever held them. */
static void owners_follow_the_books(void **state) {
  (void)state;
  tk__budget_row r;
  tk__budget_row_load(&r, &cfg, NULL, 0);
  int64_t at;
  reserve(&r, 1, 0, &at);
  assert_int_equal(reserve(&r, 7, 0, &at), 1);
  int64_t epoch = r.b.resv_epoch;
  assert_int_equal(tk__budget_row_may_promote(&r, 1, at + 10), 0); /* 7's comes first */
  assert_int_equal(tk_retry_budget_available(&r.b, at + 1000), 1); /* left the window */
  tk__budget_row_sync(&r);
  assert_int_equal(r.owners[0].owner, 0);
  assert_int_equal(reserve(&r, 1, at + 1000, &at), 0);
  assert_int_equal(reserve(&r, 1, at, &at), 1);
  assert_int_equal(r.b.resv_epoch, epoch + 1);
  assert_int_equal(tk__budget_row_may_promote(&r, 1, at), 1); /* 7's are gone from the books */
}

/* More orchestrators than the table holds count together: none of them
 * may bring one earlier until those are gone. */
static void more_owners_than_entries(void **state) {
  (void)state;
  tk__budget_row r;
  tk__budget_row_load(&r, &(tk_retry_budget_config){0, 1000000, 0.001}, NULL, 0);
  int64_t at;
  reserve(&r, 100, 0, &at);
  for (uint64_t o = 1; o <= TK__BUDGET_OWNERS + 2; o++)
    assert_int_equal(reserve(&r, o, 0, &at), 1);
  assert_int_equal(r.unowned, 2);
  for (uint64_t o = 1; o <= TK__BUDGET_OWNERS + 1; o++) {
    assert_int_equal(tk__budget_row_may_promote(&r, o, at), 0);
    tk__budget_row_count(&r, o, -1, 0);
    r.b.resv_live--; /* as if each had settled its one */
  }
  assert_int_equal(r.unowned, 1);
  assert_int_equal(tk__budget_row_may_promote(&r, TK__BUDGET_OWNERS + 2, at), 0);
  tk__budget_row_count(&r, TK__BUDGET_OWNERS + 2, -1, 0);
  r.b.resv_live--;
  assert_int_equal(r.unowned, 0);
  assert_int_equal(tk__budget_row_may_promote(&r, 1, at), 1);
}

/* Bytes that are not a row of this layout load as an empty row. */
static void other_bytes_load_empty(void **state) {
  (void)state;
  tk__budget_row r, got;
  tk__budget_row_load(&r, &cfg, NULL, 0);
  int64_t at;
  reserve(&r, 1, 0, &at);
  reserve(&r, 1, 0, &at);
  unsigned char bytes[TK__BUDGET_ROW_SIZE];
  tk__budget_row_save(&r, bytes);
  tk__budget_row_load(&got, &cfg, bytes, sizeof bytes - 1);
  assert_int_equal(got.b.started, 0);
  assert_int_equal(got.owners[0].owner, 0);
  tk__budget_row_load(&got, &cfg, bytes, sizeof bytes);
  assert_int_equal(got.owners[0].owner, 1);
  assert_int_equal(got.owners[0].live, 1);
  assert_int_equal(got.b.resv_live, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_earliest_holder_may_bring_earlier),
      cmocka_unit_test(an_owners_earliest_moves_on),
      cmocka_unit_test(a_row_of_the_older_layout_passes_no_one),
      cmocka_unit_test(owners_follow_the_books),
      cmocka_unit_test(more_owners_than_entries),
      cmocka_unit_test(other_bytes_load_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
