/* Numbered, append-only schema migrations, embedded from the .sql files of
 * each backend at build time (scripts/embed-sql). */
#ifndef TASKER_STORE_MIGRATION_H
#define TASKER_STORE_MIGRATION_H

typedef struct tk__migration {
  int number;       /* 1, 2, ...; 0 ends the table */
  const char *name; /* the file name without number and extension */
  const char *sql;
} tk__migration;

extern const tk__migration tk__sqlite_migrations[];
extern const tk__migration tk__postgres_migrations[];

#endif
