/* The library version; TK_VERSION comes from the build. */
#include <tasker/version.h>

#ifndef TK_VERSION
#define TK_VERSION "0.0.0"
#endif

const char *tk_version(void) { return TK_VERSION; }
