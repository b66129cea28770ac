#!/bin/sh
# Queues and priority through the binary and the API on PostgreSQL:
# tests/lib/queues.sh, as queues.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database queues
. "$(dirname "$0")/../lib/queues.sh"
q_run
tap_done
