/* libFuzzer target for the command handler's reading of stdout
 * (tk__command_parse_stdout in src/handlers/command.c): any bytes give no
 * results, a JSON object, or a message saying what stdout was instead,
 * never a crash or a read past the output. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "handlers/handler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly `size` bytes, not NUL-terminated, as a pipe gives. */
  char *buf = malloc(size ? size : 1);
  if (buf == NULL) return 0;
  memcpy(buf, data, size);
  json_t *doc = (json_t *)buf; /* must be overwritten */
  char why[512];
  why[0] = '\0';
  int rc = tk__command_parse_stdout(buf, size, &doc, why, sizeof why);
  if (rc == 0) {
    if (doc != NULL && !json_is_object(doc)) abort();
    if (doc) free(json_dumps(doc, JSON_COMPACT));
    json_decref(doc);
  } else if (rc != -1 || doc != NULL || strlen(why) == 0 ||
             (strncmp(why, "invalid JSON", 12) != 0 && strncmp(why, "it is ", 6) != 0)) {
    abort();
  }
  /* Small outputs are also read with the smallest message buffers. */
  char tiny[8];
  doc = NULL;
  if (tk__command_parse_stdout(buf, size, &doc, tiny, sizeof tiny) == 0) json_decref(doc);
  else if (strlen(tiny) >= sizeof tiny) abort();
  free(buf);
  return 0;
}
