/* tasker: error codes and caller-supplied error buffers.
 *
 * Every fallible function in libtasker returns 0 on success or one of the
 * negative TK_E* codes below. Functions that can say more take a `tk_err *`
 * (which may be NULL) and fill it with the code and a message that names
 * what was wrong: the input, the value, and what was expected.
 */
#ifndef TASKER_ERROR_H
#define TASKER_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one table of error codes: XX(NAME, value, description). */
#define TK_ERRNO_MAP(XX)                                                    \
  XX(EINVAL,     -1,  "invalid argument")                                   \
  XX(ENOMEM,     -2,  "out of memory")                                      \
  XX(ERANGE,     -3,  "value out of range")                                 \
  XX(ESYNTAX,    -4,  "syntax error")                                       \
  XX(ENOENT,     -5,  "not found")                                          \
  XX(EEXIST,     -6,  "already exists")                                     \
  XX(EIO,        -7,  "input/output error")                                 \
  XX(ETOOBIG,    -8,  "input too large")                                    \
  XX(ETOODEEP,   -9,  "nesting too deep")                                   \
  XX(ECONFIG,    -10, "invalid configuration")                              \
  XX(ENOHINT,    -11, "no usable retry hint")                               \
  XX(EEXHAUSTED, -12, "retries exhausted")                                  \
  XX(EFENCED,    -13, "write refused: lease lost or attempt superseded")    \
  XX(ESTORE,     -14, "store error")                                        \
  XX(ESTATE,     -15, "operation not allowed in the current state")         \
  XX(ETIMEOUT,   -16, "timed out")                                          \
  XX(EHANDLER,   -17, "handler failed")                                     \
  XX(ECANCELED,  -18, "canceled")                                           \
  XX(EUNSUPPORTED, -19, "not supported")                                 \
  XX(EDISCONNECTED, -20, "store connection lost")

typedef enum tk_errno {
#define TK__ERR_ENUM(name, value, text) TK_##name = (value),
  TK_ERRNO_MAP(TK__ERR_ENUM)
#undef TK__ERR_ENUM
  TK__ERR_LAST = -21
} tk_errno;

/* A short fixed description of `code` ("invalid argument"). Never NULL;
 * unknown codes give "unknown error". 0 gives "success". */
const char *tk_strerror(int code);

/* The symbolic name of `code` ("TK_EINVAL"), or "TK_UNKNOWN". */
const char *tk_err_name(int code);

#define TK_ERR_MSG_MAX 512

/* A caller-supplied error buffer: the code of the last error and a message
 * that says what was wrong. Callers own it (usually on the stack). */
typedef struct tk_err {
  int code;
  char msg[TK_ERR_MSG_MAX];
} tk_err;

/* Set `err` (may be NULL) to `code` with a printf-style message and return
 * `code`, so callers can write `return tk_err_set(err, TK_EINVAL, ...)`.
 * A message that does not fit is truncated, never overflowed. */
int tk_err_set(tk_err *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Reset `err` (may be NULL) to code 0 and an empty message. */
void tk_err_clear(tk_err *err);

/* The message in `err`, or tk_strerror(code) when it holds none. */
const char *tk_err_message(const tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
