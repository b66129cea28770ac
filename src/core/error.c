/* The error table and caller-supplied error buffers. */
#include <tasker/error.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tk_strerror(int code) {
  if (code == 0) return "success";
  switch (code) {
#define TK__ERR_TEXT(name, value, text) case value: return text;
    TK_ERRNO_MAP(TK__ERR_TEXT)
#undef TK__ERR_TEXT
  default: return "unknown error";
  }
}

const char *tk_err_name(int code) {
  if (code == 0) return "TK_OK";
  switch (code) {
#define TK__ERR_NAME(name, value, text) case value: return "TK_" #name;
    TK_ERRNO_MAP(TK__ERR_NAME)
#undef TK__ERR_NAME
  default: return "TK_UNKNOWN";
  }
}

int tk_err_set(tk_err *err, int code, const char *fmt, ...) {
  if (err == NULL) return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return code;
}

void tk_err_clear(tk_err *err) {
  if (err == NULL) return;
  err->code = 0;
  err->msg[0] = '\0';
}

const char *tk_err_message(const tk_err *err) {
  if (err == NULL) return "unknown error";
  if (err->msg[0] != '\0') return err->msg;
  return tk_strerror(err->code);
}
