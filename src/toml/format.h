/* Scalars back to text, as TOML (and the tagged JSON of toml-test) spell
 * them. Each writes like snprintf and returns the length needed. */
#ifndef TK_TOML_FORMAT_H
#define TK_TOML_FORMAT_H

#include <stddef.h>

#include <tasker/toml.h>

/* "inf", "-inf", "nan", or the shortest decimal that reads back as
 * exactly d, always with a '.' or an exponent ("1.0", "1e+300"). Works
 * the same in every locale. */
int tk__toml_format_float(double d, char *buf, size_t len);

/* s (n bytes, may hold NUL) as a TOML basic string: quoted, with " \\ and
 * control characters escaped. At most 6 * n + 2 characters. */
int tk__toml_format_string(const char *s, size_t n, char *buf, size_t len);

#endif
