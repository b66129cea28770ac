/* The dashboard's files, built into the binary (scripts/embed-assets makes
 * the table from src/server/assets/ at build time): nothing is read from
 * disk or fetched from elsewhere when the page is served. */
#ifndef TASKER_SERVER_ASSETS_H
#define TASKER_SERVER_ASSETS_H

#include <stddef.h>

typedef struct tk__asset {
  const char *path;         /* "/index.html", "/app.js", ... */
  const char *content_type; /* "text/html; charset=utf-8", ... */
  const unsigned char *data;
  size_t len;
} tk__asset;

/* The asset served at `path` ("/" is "/index.html"), or NULL. */
const tk__asset *tk__asset_find(const char *path);

/* The API's own documents, from src/server/api_docs/ the same way: the
 * one at `path` below /api/v1 ("/openapi.json"), or NULL. */
const tk__asset *tk__api_doc_find(const char *path);

#endif
