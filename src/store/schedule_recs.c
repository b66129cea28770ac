/* Freeing the typed rows of schedules (store.h: schedule_list). */
#include <stdlib.h>

#include "store/store.h"

void tk__schedule_recs_free(tk__schedule_rec *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].name);
    free(r[i].cron);
    free(r[i].zone);
    free(r[i].template_name);
    free(r[i].version);
    free(r[i].context);
  }
  free(r);
}
