#!/bin/sh
# The Node client (clients/node) run by real worker processes
# (tests/clients/worker.mjs) against a real `tasker serve` on a SQLite
# store: tests/clients/lib/clients.sh says what is checked.
. "$(dirname "$0")/lib/clients.sh"
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; then
  tap_fail "node 18 or newer is installed" "$(node --version 2>&1)" \
    "make test installs Debian's nodejs (make server-deps)"
  tap_done
  exit 1
fi
cl_worker_exec() { exec node "$HERE/worker.mjs" "$2" "$3" "$1" "$4" "$5"; }
cl_example_exec() { exec node "$TK_TOP/examples/workers/worker.mjs" "$1"; }
CL_BOOM_ERROR="TypeError: kaput"
cl_run
tap_done
