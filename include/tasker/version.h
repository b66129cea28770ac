/* tasker: version of the library. */
#ifndef TASKER_VERSION_H
#define TASKER_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, "MAJOR.MINOR.PATCH". */
const char *tk_version(void);

#ifdef __cplusplus
}
#endif
#endif
