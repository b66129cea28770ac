/* Secrets of one attempt and keeping them out of what it leaves behind
 * (docs/handlers.md, "Secrets are redacted"): every value a placeholder
 * read from the orchestrator's environment ({{env.NAME}}, through
 * tk__secret_getenv), and what a kind knows to be a credential (the http
 * handler's Authorization header, a URL's password), is replaced by
 * "[REDACTED]" in the attempt's message and in its results, the two
 * things of an attempt that are stored and shown. A kind that fills
 * placeholders reads the environment through tk__secret_getenv and ends
 * each attempt with tk__redact_result; that is the one rule. */
#ifndef TASKER_HANDLERS_REDACT_H
#define TASKER_HANDLERS_REDACT_H

#include <stddef.h>

#include <tasker/engine.h>

#include "core/buf.h"

/* The secrets of one attempt. Zeroed: none. */
typedef struct tk__secrets {
  char **v;
  size_t n, cap;
} tk__secrets;

/* Shorter values are not secrets worth blanking out of every message
 * (they would blank out ordinary words). */
#define TK__SECRET_MIN 4

/* Remember value[0..len) (and its URL-encoded form) as a secret; values
 * shorter than TK__SECRET_MIN bytes are not. */
void tk__secret_add(tk__secrets *s, const char *value, size_t len);
void tk__secrets_free(tk__secrets *s);

/* The environment for placeholders (tk__ph_scope's getenv, with env_ud a
 * tk__secrets): the process's variable `name`, its value kept as a
 * secret. What makes every {{env.*}} value a secret, for every kind that
 * fills placeholders. */
const char *tk__secret_getenv(void *secrets, const char *name);

/* Replace every secret in the NUL-terminated msg (of capacity cap) by
 * "[REDACTED]", truncating if it no longer fits. */
void tk__scrub(const tk__secrets *s, char *msg, size_t cap);

/* p[0..len) (any bytes) with every secret replaced, appended to out. */
void tk__scrub_bytes(const tk__secrets *s, const char *p, size_t len, tk__buf *out);

/* Take the secrets out of out->error and out->results (every string of
 * the results document, member names included). A result whose results
 * cannot be redacted (out of memory) loses them and becomes a retryable
 * failure: unredacted results are never kept. */
void tk__redact_result(const tk__secrets *s, tk_handler_result *out);

#endif
