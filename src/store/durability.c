/* Durability levels (include/tasker/store.h, docs/durability.md): the
 * names users write and the call that hands a level to the backend. */
#include <string.h>

#include "store/store.h"

static const char *const names[] = {"full", "fast"};

const char *tk_durability_name(tk_durability d) {
  return d == TK_DURABILITY_FAST ? names[1] : names[0];
}

int tk_durability_parse(const char *name, tk_durability *out) {
  for (int i = 0; i < 2; i++)
    if (name && strcmp(name, names[i]) == 0) {
      *out = i == 0 ? TK_DURABILITY_FULL : TK_DURABILITY_FAST;
      return 0;
    }
  return TK_EINVAL;
}

int tk_store_set_durability(tk_store *s, tk_durability d, tk_err *err) {
  if (d != TK_DURABILITY_FULL && d != TK_DURABILITY_FAST)
    return tk_err_set(err, TK_EINVAL, "durability %d: expected full or fast", (int)d);
  return s->ops->durability(s, d, err);
}
