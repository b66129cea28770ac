#!/bin/sh
# tests/lib/serve_reaps.sh on PostgreSQL (the private cluster of
# scripts/run-tests).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database serve_reaps
. "$(dirname "$0")/../lib/serve_reaps.sh"
sr_run
tap_done
